"""What the SAC and DDPG specs share: the parts of an
:class:`~rlkit.core.types.OffPolicyAlgorithm` that any off-policy method with a continuous actor
and a critic has in common. Each subclass names its learner class and builds its own actor and
exploration (:class:`~rlkit.algos.sac.SACSpec`, :class:`~rlkit.algos.ddpg.DDPGSpec`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.core.common import role_seed
from rlkit.core.types import BatchPolicy
from rlkit.envs.make import ActionKind, space_dims
from rlkit.replay.buffers import TensorReplayBuffer


def deterministic_batch_policy(actor: nn.Module) -> BatchPolicy:
    """``(N, obs_dim)`` -> ``(N, act_dim)`` the actor's deterministic actions (SAC's mean,
    DDPG's output), for :func:`~rlkit.envs.evaluation.evaluate_policy`."""

    def act(obs: np.ndarray) -> np.ndarray:
        return actor.deterministic(torch.as_tensor(obs, dtype=torch.float32)).numpy()

    return act


class ActorCriticSpec:
    """Continuous actions, a uniform-random warm-up of ``learning_starts`` env steps, the actor
    acting and evaluated without noise, the replay buffer on the learner's device (seeded
    ``role_seed(seed, "replay")``), and the critic's loss as the loss the loops record.

    Subclasses set ``name`` and ``learner_class`` (built as ``learner_class(obs_dim, act_dim,
    low, high, config, device)``) and write ``make_policy_network`` and
    ``exploration_policy``."""

    name: str
    learner_class: type
    action_kind: ActionKind = "continuous"
    images = False  # MLP actors and critics: an image env is refused before anything starts

    def __init__(self, config: Any) -> None:
        self.config = config

    def random_action_prob(self, env_steps: int) -> float:
        """1 during the system-wide warm-up (``learning_starts`` env steps), then 0."""
        return 1.0 if env_steps < self.config.learning_starts else 0.0

    def evaluation_policy(self, net: nn.Module) -> BatchPolicy:
        return deterministic_batch_policy(net)

    @staticmethod
    def policy_network_of(learner: Any) -> nn.Module:
        """The learner's network that acts (a single process acts with it directly)."""
        return learner.actor

    def make_learner(self, env: gym.Env, device: torch.device) -> Any:
        space = env.action_space
        return self.learner_class(*space_dims(env), space.low, space.high, self.config, device)

    def make_buffer(self, env: gym.Env, device: torch.device) -> TensorReplayBuffer:
        obs_dim, act_dim = space_dims(env)
        return TensorReplayBuffer(self.config.buffer_size, obs_dim, act_dim, device,
                                  seed=role_seed(self.config.seed, "replay"))
