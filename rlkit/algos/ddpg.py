"""DDPG (Lillicrap et al. 2016): config, losses, learner, actor-side priorities (Ape-X,
notebook 04) and its algorithm spec. ``train_single_process(DDPGSpec(config))`` trains it in one
process with uniform one-step replay; Ape-X calls :meth:`DDPGLearner.update_prioritized`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.algos.actor_specs import ActorCriticSpec
from rlkit.algos.continuous_learner import ContinuousLearner, with_uniform_warmup
from rlkit.algos.ddpg_td import (DDPGPriorityModel, ddpg_actor_loss,  # noqa: F401 (re-exported)
                                 ddpg_critic_loss, ddpg_networks, ddpg_td_errors)
from rlkit.algos.prioritized_td import (AnyBatch, importance_weights_tensor, prefixed_weights,
                                        td_tensors)
from rlkit.core.common import polyak_update
from rlkit.core.gradients import gradient_step
from rlkit.core.networks import DeterministicActor, QCritic
from rlkit.core.types import BatchPolicy, Weights
from rlkit.core.validation import SEED_MAX, integer, layers, number, text
from rlkit.core.workers import WorkerShape
from rlkit.envs.make import check_env_id, space_dims
from rlkit.replay.buffers import require_replay_settings


@dataclass(frozen=True)
class DDPGConfig(WorkerShape):
    """Settings of a DDPG run. Invalid values raise ``ValueError`` naming the field and the fix.

    The defaults solve Pendulum-v1 (deterministic evaluation mean >= -200 over 10 episodes)
    within 20k env steps in one process.
    """

    env_id: str = text("Pendulum-v1")
    seed: int = integer(0, 0, SEED_MAX)
    total_steps: int = integer(20_000, 1)  # env-step budget; training stops earlier once solved
    buffer_size: int = integer(100_000, 1)
    batch_size: int = integer(128, 1)
    actor_lr: float = number(1e-3, above=0)
    critic_lr: float = number(1e-3, above=0)
    gamma: float = number(0.99, at_least=0, below=1)
    tau: float = number(0.005, above=0, at_most=1)  # Polyak step of both target networks
    learning_starts: int = integer(1_000)  # env steps before updates; uniform-random actions
    # meanwhile in one process and in train_ray (Ape-X acts with its noise ladder from step 0)
    train_every: int = integer(1, 1)  # env steps per gradient update (update-to-data ratio 1)
    noise_sigma: float = number(0.1, at_least=0, below=10,  # a fraction of the half-range
                                meaning="the noise std as a fraction of the action half-range")
    hidden: tuple[int, ...] = layers((256, 256))  # of the actor and of the critic
    eval_every: int = integer(1_000, 1)
    eval_episodes: int = integer(10, 1)
    target_return: float | None = number(-200.0, optional=True)  # stop once an eval reaches it
    torch_threads: int = integer(1, 1)

    def check(self) -> None:
        super().check()  # the worker shape
        check_env_id(self.env_id)
        require_replay_settings(self)


class DDPGReport(NamedTuple):
    """What one DDPG update reports: detached scalar tensors left on the learner's device (or
    floats, from :meth:`DDPGLearner.update_prioritized`)."""

    critic_loss: Any
    actor_loss: Any
    q_mean: Any  # the critic's mean Q of the actor's actions (the actor's loss, negated)

    @property
    def loss(self) -> Any:
        """The loss the loops log: the critic's."""
        return self.critic_loss


class DDPGLearner(ContinuousLearner):
    """Actor and critic, each with a Polyak-averaged target network, and their optimisers
    (:class:`~rlkit.algos.continuous_learner.ContinuousLearner`'s, plus the actor's target).

    Args:
        obs_dim, act_dim: Sizes.
        action_low, action_high: The action box, ``(act_dim,)`` each.
        config: The run's :class:`DDPGConfig`.
        device: Where the networks and updates live.
    """

    def __init__(self, obs_dim: int, act_dim: int, action_low: np.ndarray,
                 action_high: np.ndarray, config: DDPGConfig,
                 device: str | torch.device = "cpu") -> None:
        super().__init__(DeterministicActor(obs_dim, act_dim, config.hidden, action_low,
                                            action_high),
                         QCritic(obs_dim, act_dim, config.hidden), config, device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self._td_errors = torch.zeros(0)  # the last update's (B,) TD errors

    def update(self, batch: AnyBatch, importance_weights: torch.Tensor | None = None
               ) -> DDPGReport:
        """One critic step, one actor step, then Polyak steps of both targets.

        Args:
            batch: ``B`` transitions (numpy or tensors): a one-step batch bootstraps with
                ``config.gamma``, an ``NStepBatch`` with its ``discounts``.
            importance_weights: ``(B,)`` weights of the critic loss (see
                :meth:`update_prioritized`); ``None``: the plain mean.

        Returns:
            A :class:`DDPGReport` of detached scalar tensors, left on the device (reading one
            makes the host wait for a GPU).
        """
        tensors = td_tensors(batch, self.config.gamma, self.device)
        critic_loss, self._td_errors = ddpg_critic_loss(
            self.critic, self.actor_target, self.critic_target, tensors, importance_weights)
        gradient_step(self.critic_opt, critic_loss, self.critic.parameters(), self.sync_gradients)

        self.critic.requires_grad_(False)  # the actor's loss trains the actor only
        actor_loss = ddpg_actor_loss(self.actor, self.critic, tensors.obs)
        gradient_step(self.actor_opt, actor_loss, self.actor.parameters(), self.sync_gradients)
        self.critic.requires_grad_(True)

        polyak_update(self.critic_target, self.critic, self.config.tau)
        polyak_update(self.actor_target, self.actor, self.config.tau)
        self.updates += 1
        return DDPGReport(critic_loss.detach(), actor_loss.detach(), -actor_loss.detach())

    def update_prioritized(self, batch: AnyBatch, importance_weights: np.ndarray
                           ) -> tuple[DDPGReport, np.ndarray]:
        """Ape-X's update (:class:`~rlkit.algos.apex.PrioritizedLearner`): :meth:`update` with
        the critic loss ``mean_i(w_i * delta_i ** 2)``; the TD errors come from the critic
        step's forward pass, before any gradient step."""
        weights = importance_weights_tensor(importance_weights, len(batch), self.device)
        report = self.update(batch, weights)
        return DDPGReport(*(float(v) for v in report)), self._td_errors.abs().cpu().numpy()

    def get_priority_weights(self) -> Weights:
        """All four networks in one dict (keys ``actor.*``, ``actor_target.*``, ``critic.*``,
        ``critic_target.*``): what an Ape-X actor loads into its :class:`DDPGPriorityModel`."""
        return prefixed_weights(ddpg_networks(self))

    def networks(self) -> dict[str, nn.Module]:
        return ddpg_networks(self)


def gaussian_exploration_policy(actor: DeterministicActor, rng: np.random.Generator,
                                low: np.ndarray, high: np.ndarray, noise_std: np.ndarray | float,
                                random_prob: Callable[[], float]) -> BatchPolicy:
    """Batched behaviour policy ``clip(mu(s) + N(0, noise_std**2), low, high)``; with
    probability ``random_prob()`` (1 during the warm-up, 0 after) uniform-random actions
    instead. ``(N, obs_dim)`` -> ``(N, act_dim)`` float32. ``noise_std`` is a float,
    ``(act_dim,)``, or ``(N, act_dim)`` (one scale per env: an Ape-X noise ladder)."""

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            actions = actor(torch.as_tensor(obs, dtype=torch.float32)).numpy()
        noisy = actions + noise_std * rng.standard_normal(actions.shape)
        return np.clip(noisy, low, high).astype(np.float32)

    return with_uniform_warmup(act, rng, low, high, random_prob)


class DDPGSpec(ActorCriticSpec):
    """DDPG as an :class:`rlkit.core.types.OffPolicyAlgorithm`: behaviour is the actor plus Gaussian
    noise (uniform-random during the warm-up); the rest is
    :class:`~rlkit.algos.actor_specs.ActorCriticSpec`'s."""

    name = "DDPG"
    learner_class = DDPGLearner

    def noise_std(self, env: gym.Env) -> np.ndarray:
        """``(act_dim,)`` exploration noise std: ``noise_sigma * (high - low) / 2``."""
        space = env.action_space
        return (self.config.noise_sigma * (space.high - space.low) / 2).astype(np.float32)

    def make_policy_network(self, env: gym.Env) -> nn.Module:
        obs_dim, act_dim = space_dims(env)
        space = env.action_space
        return DeterministicActor(obs_dim, act_dim, self.config.hidden, space.low, space.high)

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           random_action_prob: Callable[[], float]) -> BatchPolicy:
        space = env.action_space
        return gaussian_exploration_policy(net, rng, space.low, space.high, self.noise_std(env),
                                           random_action_prob)
