"""What the generic distributed roles need to know about each algorithm.

:mod:`rlkit.actors` (rollout worker, learner, evaluator) and :func:`rlkit.parallel.train_ray`
are written once. An *algorithm spec* tells them which network a worker acts with, how it
explores, how the learner is built and fed, and how the policy is evaluated. A spec is a small
picklable object holding the run's config, so it travels to every actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.buffers import ReplayBuffer, TensorReplayBuffer
from rlkit.dqn import (DQNConfig, DQNLearner, epsilon_greedy_policy, greedy_batch_policy,
                       linear_epsilon)
from rlkit.envs import ActionKind, space_dims
from rlkit.evaluation import BatchPolicy
from rlkit.networks import QNetwork, SquashedGaussianActor
from rlkit.sac import SACConfig, SACLearner, deterministic_batch_policy, sac_exploration_policy


class DQNSpec:
    """DQN: workers act epsilon-greedily with a Q-network; a numpy buffer feeds the learner."""

    name = "DQN"
    action_kind: ActionKind = "discrete"

    def __init__(self, config: DQNConfig) -> None:
        self.config = config

    def exploration_at(self, env_steps: int) -> float:
        """Epsilon after ``env_steps`` env steps of the whole system."""
        c = self.config
        return linear_epsilon(env_steps, c.epsilon_start, c.epsilon_end, c.epsilon_decay_steps)

    def make_policy_network(self, env: gym.Env) -> nn.Module:
        obs_dim, n_actions = space_dims(env)
        return QNetwork(obs_dim, n_actions, self.config.hidden)

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           exploration: Callable[[], float]) -> BatchPolicy:
        return epsilon_greedy_policy(net, space_dims(env)[1], rng, exploration)

    def evaluation_policy(self, net: nn.Module) -> BatchPolicy:
        return greedy_batch_policy(net)

    @staticmethod
    def policy_network_of(learner: DQNLearner) -> nn.Module:
        """The learner's network that acts (a single process acts with it directly)."""
        return learner.q

    def make_learner(self, env: gym.Env, device: torch.device) -> DQNLearner:
        return DQNLearner(*space_dims(env), self.config, device)

    def make_buffer(self, env: gym.Env, device: torch.device) -> ReplayBuffer:
        return ReplayBuffer(self.config.buffer_size, space_dims(env)[0], None,
                            seed=self.config.seed + 1)

    @staticmethod
    def loss_of(metrics: dict[str, Any]) -> Any:
        return metrics["loss"]


class SACSpec:
    """SAC: workers sample from the squashed-Gaussian actor (uniform-random during the
    warm-up); the learner's buffer lives on the learner's device."""

    name = "SAC"
    action_kind: ActionKind = "continuous"

    def __init__(self, config: SACConfig) -> None:
        self.config = config

    def exploration_at(self, env_steps: int) -> float:
        """Probability of a uniform-random action: 1 during the system-wide warm-up, then 0."""
        return 1.0 if env_steps < self.config.learning_starts else 0.0

    def make_policy_network(self, env: gym.Env) -> nn.Module:
        obs_dim, act_dim = space_dims(env)
        space = env.action_space
        return SquashedGaussianActor(obs_dim, act_dim, self.config.hidden, space.low, space.high)

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           exploration: Callable[[], float]) -> BatchPolicy:
        space = env.action_space
        return sac_exploration_policy(net, rng, space.low, space.high, exploration)

    def evaluation_policy(self, net: nn.Module) -> BatchPolicy:
        return deterministic_batch_policy(net)

    @staticmethod
    def policy_network_of(learner: SACLearner) -> nn.Module:
        """The learner's network that acts (a single process acts with it directly)."""
        return learner.actor

    def make_learner(self, env: gym.Env, device: torch.device) -> SACLearner:
        space = env.action_space
        return SACLearner(*space_dims(env), space.low, space.high, self.config, device)

    def make_buffer(self, env: gym.Env, device: torch.device) -> TensorReplayBuffer:
        obs_dim, act_dim = space_dims(env)
        return TensorReplayBuffer(self.config.buffer_size, obs_dim, act_dim, device,
                                  seed=self.config.seed + 1)

    @staticmethod
    def loss_of(metrics: dict[str, Any]) -> Any:
        return metrics["critic_loss"]


AlgorithmSpec = DQNSpec | SACSpec
