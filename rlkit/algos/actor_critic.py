"""The actor-critic network and its two policies, shared by every on-policy algorithm
(A2C/A3C, IMPALA, PPO/APPO on discrete actions; :mod:`rlkit.algos.policy_heads` adds the
Gaussian head for continuous actions), and the learner state they all keep.

(The off-policy actor-critics, DDPG and SAC, share :mod:`rlkit.algos.actor_specs`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.core.common import eval_seed
from rlkit.core.networks import (actor_and_critic, actor_critic_forward, load_numpy_weights,
                                 load_optimizer_state, module_weights)
from rlkit.core.spaces import ObsSpec
from rlkit.core.types import BatchPolicy, SamplingPolicy, Weights
from rlkit.envs.evaluation import evaluate_policy


class ActorCritic(nn.Module):
    """Two MLPs: ``actor(s) -> logits (B, n_actions)``, ``critic(s) -> V(s) (B,)`` (on frames,
    each with its own conv encoder first, or with ``shared_encoder`` one encoder under both:
    :func:`rlkit.core.networks.actor_and_critic`).

    Separate, not a shared body, by default: the value loss is measured in squared returns (up
    to ~1e4 on CartPole) and would otherwise dominate the shared features; apart, each network
    gets its own features and ``value_coef`` only weighs the critic's gradient. (The gradient
    norm is still clipped over both networks together, so a very large critic gradient also
    shortens the actor's step; clipping each network on its own is an easy variation to try.)
    On Atari, where returns are scores of a few points, the standard actor-critic shares its
    conv encoder (``shared_encoder=True``: :data:`rlkit.algos.ppo.PONG_APPO`).
    """

    def __init__(self, obs_dim: int | ObsSpec, n_actions: int, hidden: Sequence[int],
                 shared_encoder: bool = False) -> None:
        super().__init__()
        self.actor, self.critic = actor_and_critic(obs_dim, n_actions, hidden, shared_encoder)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, *obs_shape)`` -> ``(logits (B, n_actions), values (B,))``."""
        return actor_critic_forward(self.actor, self.critic, obs)

    @torch.no_grad()
    def greedy_actions(self, obs: np.ndarray) -> np.ndarray:
        """``(B, *obs_shape)`` (float32 vectors, uint8 frames) -> ``(B,)`` int64 most probable
        actions (for evaluation)."""
        return self.actor(torch.as_tensor(obs)).argmax(-1).numpy()


def sampling_policy(net: ActorCritic, rng: np.random.Generator) -> SamplingPolicy:
    """The acting policy of A2C, A3C and IMPALA: sample ``a ~ pi(.|s)`` by inverting the
    categorical CDF with one uniform number per env from ``rng``; returns the actions ``(N,)``
    int64 and their log-probabilities ``(N,)`` float32 (IMPALA's behaviour ``log mu``)."""

    @torch.no_grad()
    def act(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        log_probs = F.log_softmax(net.actor(torch.as_tensor(obs)), dim=-1).numpy()
        cdf = np.cumsum(np.exp(log_probs), axis=1)
        actions = np.minimum((rng.random((len(obs), 1)) > cdf).sum(axis=1), cdf.shape[1] - 1)
        return actions, log_probs[np.arange(len(obs)), actions]

    return act


def greedy_policy(net: ActorCritic) -> BatchPolicy:
    """The evaluation policy: the most probable action, ``(N, obs_dim)`` -> ``(N,)`` int64."""
    return net.greedy_actions


def greedy_eval(weights: Weights, obs_dim: int | ObsSpec, n_actions: int, config: Any,
                eval_index: int, net: nn.Module | None = None) -> tuple[float, float]:
    """Mean and std of ``config.eval_episodes`` greedy episodes of ``config.env_id`` with
    ``weights`` loaded into ``net`` (default: an :class:`ActorCritic`; any network with
    ``greedy_actions``), on the fresh seeds of evaluation ``eval_index``. A2C/A3C, IMPALA and
    PPO evaluate with it; ``config`` is any of theirs."""
    net = ActorCritic(obs_dim, n_actions, config.hidden) if net is None else net
    load_numpy_weights(net, weights)
    returns = evaluate_policy(greedy_policy(net), config.env_id, config.eval_episodes,
                              eval_seed(config.seed, eval_index, config.eval_episodes))
    return float(returns.mean()), float(returns.std())


class ActorCriticState:
    """What the actor-critic learners (A2C's, IMPALA's) share: ``net``, ``optimizer`` and
    ``updates``, their weights, and their state for a checkpoint."""

    net: ActorCritic
    optimizer: torch.optim.Optimizer
    updates: int

    def get_weights(self) -> Weights:
        return module_weights(self.net)

    def set_weights(self, weights: Weights) -> None:
        load_numpy_weights(self.net, weights)

    def state_dict(self) -> dict[str, Any]:
        """Network, optimiser and update count: everything needed to continue training."""
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.net.load_state_dict(state["net"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.updates = int(state["updates"])
