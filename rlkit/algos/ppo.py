"""PPO (Schulman et al., 2017): the clipped surrogate objective over GAE(lambda) advantages,
with several epochs of minibatch SGD over each batch of fragments.

Most of it is A2C's (:mod:`rlkit.algos.a2c`): the network (:class:`ActorCritic`), the acting
policy, the value and entropy terms, advantage normalisation, and the returns (GAE is
:func:`nstep_advantages` with ``lam < 1``). What PPO adds is the surrogate
(:func:`clipped_surrogate`) and reusing one batch for ``epochs`` passes, which the clip makes
safe. The learner is plain torch: :func:`rlkit.train.ppo.train_ppo` runs it in one process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.algos.a2c import (ActorCritic, ActorCriticState, entropy, normalize_advantages,
                             nstep_advantages, value_loss)
from rlkit.algos.impala import next_state_values, stack_fragments
from rlkit.core.gradients import GradientSync, no_sync
from rlkit.core.networks import make_adam
from rlkit.core.validation import (SEED_MAX, Validated, fail, flag, integer, layers, number,
                                   text)
from rlkit.envs.make import check_env_id
from rlkit.envs.runner import Fragment


@dataclass(frozen=True)
class PPOConfig(Validated):
    """Settings of a PPO run on a discrete-action environment; the defaults are notebook 08's
    CartPole-v1 settings (the same for every seed). Invalid values raise ``ValueError`` naming
    the field and the fix.

    One batch is ``n_steps`` steps of each of ``envs_per_worker`` environments (per worker);
    the learner makes ``epochs`` passes over it in shuffled minibatches of ``minibatch_size``
    real steps, then the policy acts again with the new weights.
    """

    env_id: str = text("CartPole-v1")
    seed: int = integer(0, 0, SEED_MAX)
    envs_per_worker: int = integer(8, 1)  # N: environments per worker, stepped in lockstep
    n_steps: int = integer(32, 1)  # T: steps per env in one batch
    epochs: int = integer(10, 1)  # passes of SGD over each batch
    minibatch_size: int = integer(64, 1)  # real steps per SGD step
    clip: float = number(0.2, above=0)  # the surrogate's ratio stays in [1 - clip, 1 + clip]
    gamma: float = number(0.98, at_least=0, below=1)
    gae_lambda: float = number(0.8, at_least=0, at_most=1)
    learning_rate: float = number(1e-3, above=0)  # Adam
    entropy_coef: float = number(0.0, at_least=0)
    value_coef: float = number(0.5, at_least=0)
    max_grad_norm: float = number(0.5, above=0)
    normalize_advantages: bool = flag(True)  # per minibatch
    hidden: tuple[int, ...] = layers((64, 64))
    total_steps: int = integer(100_000, 1)  # env-step budget; stops earlier once solved
    eval_every: int = integer(5_000, 1)  # env steps between greedy evaluations
    eval_episodes: int = integer(20, 1)
    target_return: float | None = number(475.0, optional=True)
    torch_threads: int = integer(1, 1)

    def check(self) -> None:
        check_env_id(self.env_id)
        if self.minibatch_size > self.steps_per_batch:
            fail("minibatch_size", self.minibatch_size, f"is larger than one batch "
                 f"(n_steps * envs_per_worker = {self.steps_per_batch} env steps), so no "
                 "minibatch could be filled", f"use minibatch_size <= {self.steps_per_batch}, "
                 f"e.g. {max(1, self.steps_per_batch // 4)} (four minibatches per epoch)")

    @property
    def steps_per_batch(self) -> int:
        """Env steps one worker collects per batch: ``n_steps * envs_per_worker``."""
        return self.n_steps * self.envs_per_worker


def clipped_surrogate(log_probs: torch.Tensor, old_log_probs: torch.Tensor,
                      advantages: torch.Tensor, clip: float) -> torch.Tensor:
    """PPO's policy loss, ``-mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))`` with the
    probability ratio ``r = pi(a|s) / pi_old(a|s)`` and ``eps = clip``.

    The ``min`` makes the objective pessimistic: once ``r`` has moved past ``1 + eps`` for a
    good action (``A > 0``) or below ``1 - eps`` for a bad one (``A < 0``), the clipped term is
    the smaller, it is constant in the weights, and that sample stops pushing. A move in the
    other direction is never clipped, so a step that made things worse can always be undone.
    At ``r = 1`` (the first minibatch of the first epoch) its gradient is A2C's,
    ``-mean(A * grad log pi)``.

    Args:
        log_probs: ``(B,)`` ``log pi(a|s)`` under the weights being trained (differentiable).
        old_log_probs: ``(B,)`` ``log pi_old(a|s)`` of the policy that acted (constant).
        advantages: ``(B,)`` (constant).
        clip: ``eps > 0``.
    """
    ratio = torch.exp(log_probs - old_log_probs.detach())
    advantages = advantages.detach()
    unclipped = ratio * advantages
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * advantages
    return -torch.min(unclipped, clipped).mean()


def ppo_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             old_log_probs: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor,
             config: PPOConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """``clipped_surrogate + value_coef * value_loss - entropy_coef * entropy`` on a minibatch.

    The value loss is A2C's plain ``mean((R - V)^2)``, not clipped: clipping the value update
    around the old values (as the PPO code of OpenAI's baselines does) did not help and often
    hurt in the large study of Andrychowicz et al. (2021, "What matters in on-policy RL"),
    and it ties the value's step to the reward scale.

    Args:
        logits: ``(B, n_actions)``; values, old_log_probs, advantages, returns: ``(B,)``;
            actions: ``(B,)`` int64.
        config: ``clip``, the coefficients, ``normalize_advantages``.

    Returns:
        The scalar loss and its three parts as floats.
    """
    log_probs = F.log_softmax(logits, dim=-1).gather(1, actions[:, None]).squeeze(1)
    if config.normalize_advantages:
        advantages = normalize_advantages(advantages)
    parts = {"policy": clipped_surrogate(log_probs, old_log_probs, advantages, config.clip),
             "value": value_loss(values, returns), "entropy": entropy(logits)}
    total = (parts["policy"] + config.value_coef * parts["value"]
             - config.entropy_coef * parts["entropy"])
    return total, {k: float(v.detach()) for k, v in parts.items()}


@torch.no_grad()
def policy_shift(log_probs: torch.Tensor, old_log_probs: torch.Tensor, clip: float
                 ) -> dict[str, float]:
    """How far the policy moved from the one that acted, over ``(B,)`` samples:
    ``approx_kl``, the estimator ``mean((r - 1) - log r)`` of ``KL(pi_old || pi)`` (>= 0, 0
    only if nothing moved), and ``clip_fraction``, the share of ratios ``r`` outside
    ``[1 - clip, 1 + clip]``, where the surrogate no longer pushes."""
    log_ratio = log_probs - old_log_probs
    ratio = log_ratio.exp()
    return {"approx_kl": float((ratio - 1 - log_ratio).mean()),
            "clip_fraction": float(((ratio - 1).abs() > clip).float().mean())}


class PPOLearner(ActorCriticState):
    """Owns the :class:`ActorCritic` and its Adam optimiser; :meth:`learn` takes one batch.

    ``updates`` counts batches learned, the policy *version* (weights after ``k`` batches are
    version ``k``); ``sgd_steps`` counts optimiser steps (``epochs`` times the minibatches).
    """

    def __init__(self, obs_dim: int, n_actions: int, config: PPOConfig) -> None:
        torch.manual_seed(config.seed)
        self.config = config
        self.net = ActorCritic(obs_dim, n_actions, config.hidden)
        self.optimizer = make_adam(self.net.parameters(), config.learning_rate)
        self.updates = 0
        self.sgd_steps = 0
        self.shuffle = torch.Generator().manual_seed(config.seed)
        self.sync_gradients: GradientSync = no_sync

    def advantages(self, batch: dict[str, torch.Tensor]
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE(lambda) ``(returns, advantages)``, each ``(T, M)`` float32, with the current
        value function: :func:`nstep_advantages` with ``lam = config.gae_lambda``."""
        with torch.no_grad():
            T, M = batch["rewards"].shape
            values = self.net.critic(batch["obs"].reshape(T * M, -1)).reshape(T, M)
            final = next_state_values(self.net, batch)
        returns, adv = nstep_advantages(
            batch["rewards"].numpy(), values.numpy(), batch["terminations"].numpy(),
            batch["truncations"].numpy(), final.numpy(), final[-1].numpy(),
            self.config.gamma, self.config.gae_lambda)
        return (torch.as_tensor(returns, dtype=torch.float32),
                torch.as_tensor(adv, dtype=torch.float32))

    def learn(self, fragments: Sequence[Fragment]) -> dict[str, float]:
        """``epochs`` passes of shuffled minibatch SGD over the real steps of ``fragments``
        (reset rows left out), each fragment collected by the current weights' policy.

        Returns:
            The loss parts averaged over the last epoch's minibatches, and
            :func:`policy_shift` of the whole batch after the last epoch.
        """
        cfg = self.config
        batch = stack_fragments(fragments)
        returns, adv = self.advantages(batch)
        real = ~batch["resets"]
        obs, actions = batch["obs"][real], batch["actions"][real]
        old_log_probs, returns, adv = batch["log_probs"][real], returns[real], adv[real]
        n = len(actions)
        last: list[dict[str, float]] = []
        for epoch in range(cfg.epochs):
            order = torch.randperm(n, generator=self.shuffle)
            last = []
            for start in range(0, n, cfg.minibatch_size):
                idx = order[start: start + cfg.minibatch_size]
                logits, values = self.net(obs[idx])
                loss, metrics = ppo_loss(logits, values, actions[idx], old_log_probs[idx],
                                         adv[idx], returns[idx], cfg)
                if not math.isfinite(float(loss.detach())):
                    raise FloatingPointError(
                        f"PPO loss became non-finite at batch {self.updates}, epoch {epoch}: "
                        f"{metrics}. Fix: lower learning_rate or max_grad_norm.")
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.sync_gradients(self.net.parameters())
                nn.utils.clip_grad_norm_(self.net.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                self.sgd_steps += 1
                last.append(metrics)
        self.updates += 1
        out = {k: float(np.mean([m[k] for m in last])) for k in last[0]}
        out["loss"] = (out["policy"] + cfg.value_coef * out["value"]
                       - cfg.entropy_coef * out["entropy"])
        with torch.no_grad():
            log_probs = F.log_softmax(self.net.actor(obs), -1).gather(1, actions[:, None])
        return out | policy_shift(log_probs.squeeze(1), old_log_probs, cfg.clip)
