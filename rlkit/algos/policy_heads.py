"""The two policy heads of the on-policy actor-critics: categorical (discrete actions: A2C's
:class:`~rlkit.algos.actor_critic.ActorCritic`) and Gaussian (continuous actions:
:class:`GaussianActorCritic`), behind three functions that work for either, so PPO's learner,
IMPALA's workers and the one-process loop never ask which one they hold.

* :func:`make_actor_critic`: the network for an env's action space;
* :func:`acting_policy`: the sampling policy a worker acts with (actions and ``log mu``);
* :func:`evaluate_actions`: ``log pi(a|s)``, the entropy and ``V(s)`` of a batch, for the loss.

The greedy (evaluation) policy of either is its ``greedy_actions``: the most probable action,
or the Gaussian's mean.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.algos.actor_critic import ActorCritic, sampling_policy
from rlkit.core.networks import actor_and_critic, actor_critic_forward
from rlkit.core.spaces import ObsSpec
from rlkit.core.types import ActionKind, SamplingPolicy
from rlkit.core.validation import fail
from rlkit.envs.make import make_env


class GaussianActorCritic(nn.Module):
    """Continuous actions: ``actor(s) -> mean (B, act_dim)``, a learned state-independent
    ``log_std (act_dim,)``, and a separate ``critic(s) -> V(s) (B,)`` (as A2C's, for the same
    reason: the value loss's scale would swamp shared features).

    The sampled action is not squashed or clipped here: the environment clips it to its bounds
    (Pendulum does), and ``log pi`` is that of the sample, as in most PPO code.
    """

    def __init__(self, obs_dim: int | ObsSpec, act_dim: int, hidden: Sequence[int],
                 log_std: float = 0.0, shared_encoder: bool = False) -> None:
        super().__init__()
        self.actor, self.critic = actor_and_critic(obs_dim, act_dim, hidden, shared_encoder)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std)))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, *obs_shape)`` -> ``(means (B, act_dim), values (B,))``."""
        return actor_critic_forward(self.actor, self.critic, obs)

    @torch.no_grad()
    def greedy_actions(self, obs: np.ndarray) -> np.ndarray:
        """``(B, *obs_shape)`` -> ``(B, act_dim)`` float32 means (for evaluation)."""
        return self.actor(torch.as_tensor(obs)).numpy()


@functools.lru_cache(maxsize=64)
def action_kind_of(env_id: str) -> ActionKind:
    """``"discrete"`` for a Discrete action space, ``"continuous"`` for a 1-D Box; any other
    space (MultiDiscrete, Tuple, an image Box) is refused naming both heads."""
    env = make_env(env_id, 0)
    try:
        space = env.action_space
        if isinstance(space, gym.spaces.Discrete):
            return "discrete"
        if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
            return "continuous"
        raise ValueError(f"env_id={env_id!r} has the action space {space}, but the on-policy "
                         f"heads act on Discrete actions (categorical) or a 1-D Box "
                         f"(Gaussian). Fix: choose an env with one of those, or wrap it (e.g. "
                         f"flatten a MultiDiscrete into one Discrete).")
    finally:
        env.close()


def make_actor_critic(obs_dim: int | ObsSpec, action_dim: int, hidden: Sequence[int],
                      kind: ActionKind, shared_encoder: bool = False
                      ) -> ActorCritic | GaussianActorCritic:
    """A2C's categorical :class:`ActorCritic` for ``"discrete"`` (``action_dim`` actions), a
    :class:`GaussianActorCritic` for ``"continuous"`` (``action_dim`` numbers per action);
    ``shared_encoder``: one conv encoder under both heads (frames only)."""
    if kind not in ("discrete", "continuous"):
        fail("kind", kind, "is not an action kind", 'pass "discrete" (a categorical head) or '
             '"continuous" (a Gaussian head)')
    if kind == "discrete":
        return ActorCritic(obs_dim, action_dim, hidden, shared_encoder)
    return GaussianActorCritic(obs_dim, action_dim, hidden, shared_encoder=shared_encoder)


def acting_policy(net: ActorCritic | GaussianActorCritic,
                  rng: np.random.Generator) -> SamplingPolicy:
    """What a worker acts with: ``obs (N, obs_dim)`` -> ``(actions, log_probs (N,))``, random
    numbers from ``rng``. Categorical: :func:`rlkit.algos.actor_critic.sampling_policy`. Gaussian:
    ``a = mean + std * z``, ``z ~ N(0, I)``, with ``log pi(a|s)`` summed over the action's
    dimensions."""
    if isinstance(net, ActorCritic):
        return sampling_policy(net, rng)

    @torch.no_grad()
    def act(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = net.actor(torch.as_tensor(obs)).numpy()
        log_std = net.log_std.numpy()
        z = rng.standard_normal(mean.shape)
        actions = (mean + np.exp(log_std) * z).astype(np.float32)
        log_probs = (-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return actions, log_probs.astype(np.float32)

    return act


def evaluate_actions(net: ActorCritic | GaussianActorCritic, obs: torch.Tensor,
                     actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(log pi(a|s) (B,), entropy (B,), V(s) (B,))`` of ``B`` observations and the actions
    taken in them (``(B,)`` int64, or ``(B, act_dim)`` float32), all differentiable."""
    out, values = net(obs)
    if isinstance(net, ActorCritic):
        log_p = F.log_softmax(out, dim=-1)
        return (log_p.gather(1, actions[:, None]).squeeze(1), -(log_p.exp() * log_p).sum(-1),
                values)
    dist = torch.distributions.Normal(out, net.log_std.exp())
    return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1), values
