"""What DDPG's and SAC's learners share: an actor, a critic with a Polyak-averaged target,
their Adam optimisers, the update count and the gradient sync of a learner group, the actor's
weights for the workers, and the state a checkpoint saves; and the uniform-random warm-up both
behaviour policies start with. Each learner adds its own parts and its own ``update``
(:class:`~rlkit.algos.ddpg.DDPGLearner`, :class:`~rlkit.algos.sac.SACLearner`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from rlkit.core.gradients import GradientSync, no_sync
from rlkit.core.networks import load_optimizer_state, make_adam, module_weights
from rlkit.core.types import BatchPolicy, Weights


class ContinuousLearner:
    """The parts of an off-policy learner with a continuous actor and a critic.

    Args:
        actor, critic: The networks, built by the subclass in that order (the order their
            initial weights are drawn in); moved to ``device`` here.
        config: The run's config (``actor_lr``, ``critic_lr``, ``gamma``, ``tau``, ...).
        device: Where the networks and updates live.
        capturable: Optimisers whose step a CUDA graph can record (SAC's graph path).

    A subclass adds its networks to :meth:`networks` and its optimisers to :meth:`optimizers`,
    and :meth:`state_dict` saves them all.
    """

    def __init__(self, actor: nn.Module, critic: nn.Module, config: Any,
                 device: str | torch.device, capturable: bool = False) -> None:
        self.config = config
        self.device = torch.device(device)
        self.actor = actor.to(self.device)
        self.critic = critic.to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = make_adam(self.actor.parameters(), config.actor_lr, capturable)
        self.critic_opt = make_adam(self.critic.parameters(), config.critic_lr, capturable)
        self.updates = 0
        self.sync_gradients: GradientSync = no_sync  # average_gradients in a group

    def networks(self) -> dict[str, nn.Module]:
        """The networks a checkpoint saves, by name."""
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The optimisers a checkpoint saves, by name."""
        return {"actor_opt": self.actor_opt, "critic_opt": self.critic_opt}

    def get_weights(self) -> Weights:
        """The actor's weights (all a rollout worker needs) as numpy arrays on the host."""
        return module_weights(self.actor)

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimisers and update count: everything needed to continue training."""
        return {**{name: net.state_dict() for name, net in self.networks().items()},
                **{name: opt.state_dict() for name, opt in self.optimizers().items()},
                "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (tensors may be on any device)."""
        for name, net in self.networks().items():
            net.load_state_dict(state[name])
        for name, opt in self.optimizers().items():
            load_optimizer_state(opt, state[name])
        self.updates = int(state["updates"])


def with_uniform_warmup(act: BatchPolicy, rng: np.random.Generator, low: np.ndarray,
                        high: np.ndarray, random_prob: Callable[[], float]) -> BatchPolicy:
    """``act``, except that with probability ``random_prob()`` (1 during the warm-up, 0 after)
    the whole batch acts uniformly at random in ``[low, high]`` instead. ``(N, obs_dim)`` ->
    ``(N, act_dim)`` float32; one draw of ``rng`` decides, before ``act`` draws anything."""

    def warm_or_act(obs: np.ndarray) -> np.ndarray:
        if rng.random() < random_prob():
            return rng.uniform(low, high, size=(len(obs), len(low))).astype(np.float32)
        return act(obs)

    return warm_or_act
