"""Advantage actor-critic (A2C / A3C): config, network, n-step advantages, losses, learner.

Everything here is synchronous and process-local; :mod:`rlkit.distributed.a3c.driver`
runs it as gradient workers and a gradient server. The network, its policies and the learner
state are :mod:`rlkit.algos.actor_critic`'s (IMPALA and PPO use them too). Arrays are
*time-major*: ``(T, N)`` means ``T`` steps of ``N`` environments stepped in lockstep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.algos.actor_critic import ActorCritic, ActorCriticState
from rlkit.algos.vtrace import check_time_major
from rlkit.core.networks import make_adam
from rlkit.core.validation import (SEED_MAX, Validated, env_ids, fail, flag, integer, is_real,
                                   layers, number, text)
from rlkit.envs.make import check_env_id
from rlkit.envs.runner import Fragment


@dataclass(frozen=True)
class A2CConfig(Validated):
    """Settings of an A2C / A3C run on a discrete-action environment.

    One gradient is computed from a fragment of ``n_steps`` steps of each of ``envs_per_worker``
    environments (``n_steps * envs_per_worker`` env steps per gradient and per worker).
    ``num_workers`` and ``worker_env_ids`` shape the Ray runs (``train_a3c_ray``,
    ``train_a2c_ray``); one-process ``train_a2c`` runs one worker. ``eval_every=None`` runs no
    evaluation (a fixed-budget timing run: it then stops at ``total_steps``).
    """

    env_id: str = text("CartPole-v1")
    seed: int = integer(0, 0, SEED_MAX)
    num_workers: int = integer(2, 1)  # gradient workers of a Ray run
    worker_env_ids: tuple[str | None, ...] | None = env_ids()  # per worker; None: env_id
    envs_per_worker: int = integer(8, 1)  # environments per worker, stepped in lockstep
    n_steps: int = integer(16, 1)  # fragment length T: the n of the n-step return
    gamma: float = number(0.99, at_least=0, below=1)
    learning_rate: float = number(1e-3, above=0)  # Adam
    entropy_coef: float = number(0.01, at_least=0)
    value_coef: float = number(0.5, at_least=0)
    max_grad_norm: float = number(0.5, above=0)
    normalize_advantages: bool = flag(True)
    hidden: tuple[int, ...] = layers((64, 64))
    total_steps: int = integer(300_000, 1)
    eval_every: int | None = integer(10_000, 1, optional=True)  # None: no evaluation
    eval_episodes: int = integer(20, 1)
    target_return: float | None = number(475.0, optional=True)
    torch_threads: int = integer(1, 1)

    def check(self) -> None:
        check_env_id(self.env_id)
        if self.worker_env_ids is not None and len(self.worker_env_ids) != self.num_workers:
            fail("worker_env_ids", list(self.worker_env_ids), f"has {len(self.worker_env_ids)} "
                 f"entries for num_workers={self.num_workers}", "give one id (or None) per "
                 "worker")

    @property
    def steps_per_gradient(self) -> int:
        """Env steps behind one gradient: ``n_steps * envs_per_worker``."""
        return self.n_steps * self.envs_per_worker


def nstep_advantages(rewards: np.ndarray, values: np.ndarray, terminations: np.ndarray,
                     truncations: np.ndarray, final_values: np.ndarray,
                     last_values: np.ndarray, gamma: float, lam: float = 1.0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """N-step returns and advantages of a fragment, computed backwards in time.

    ``R_t = r_t`` if step ``t`` terminated; ``r_t + gamma * V(final obs)`` if it was truncated
    (a time limit: the real final observation is not terminal, so it bootstraps); else
    ``r_t + gamma * R_{t+1}``, with ``R_T = V(s_T)``, the value after the fragment.

    With ``lam < 1`` (PPO's GAE, notebook 08) the step after ``t`` is worth the mix
    ``lam * R_{t+1} + (1 - lam) * V(s_{t+1})`` instead of ``R_{t+1}``: ``R_t`` is then the
    lambda-return and ``R_t - V(s_t)`` the GAE(lambda) advantage
    ``sum_k (gamma * lam)^k delta_{t+k}``; ``lam = 0`` gives the one-step TD target.

    Args:
        rewards: ``(T, N)``.
        values: ``(T, N)`` ``V(s_t)``.
        terminations: ``(T, N)`` 1.0 where step ``t`` reached a terminal state.
        truncations: ``(T, N)`` 1.0 where step ``t`` hit a time limit (and did not terminate).
        final_values: ``(T, N)`` value of the real final observation where truncated (read
            only there).
        last_values: ``(N,)`` ``V(s_T)`` of the observation after the fragment.
        gamma: Discount.
        lam: GAE's lambda in ``[0, 1]``; 1 (the default) is the plain n-step return.

    Returns:
        ``(returns (T, N), advantages (T, N))``, ``advantages = returns - values``.
    """
    arrays = dict(rewards=rewards, values=values, terminations=terminations,
                  truncations=truncations, final_values=final_values, last_values=last_values)
    check_time_major("nstep_advantages", {k: np.shape(v) for k, v in arrays.items()},
                     "last_values")
    if not (is_real(lam) and 0.0 <= lam <= 1.0):
        fail("lam", lam, "must be a number in [0, 1] (GAE's lambda: 1 is the n-step return, 0 "
             "the one-step TD target)", "use e.g. lam=0.95")
    read = dict(arrays, final_values=np.where(np.asarray(truncations) > 0, final_values, 0.0))
    not_finite = [k for k, v in read.items() if not np.isfinite(v).all()]
    if not_finite:
        raise FloatingPointError(
            f"{', '.join(not_finite)} hold{'s' * (len(not_finite) == 1)} NaN or infinite "
            f"values, so nstep_advantages would return NaN returns for every step before them. "
            f"Fix: find where they became non-finite (a reward or an observation the env "
            f"returned as NaN; a value network that diverged: lower the learning rate).")
    returns = np.zeros_like(rewards, dtype=np.float64)
    following = last_values.astype(np.float64)
    for t in range(rewards.shape[0] - 1, -1, -1):
        term, trunc = terminations[t] > 0, truncations[t] > 0
        following = np.where(trunc, final_values[t], following)
        returns[t] = rewards[t] + gamma * np.where(term, 0.0, following)
        following = lam * returns[t] + (1.0 - lam) * values[t]
    return returns, returns - values


def normalize_advantages(advantages: torch.Tensor) -> torch.Tensor:
    """``(A - mean(A)) / (std(A) + 1e-8)`` over ``(B,)`` advantages (unchanged if ``B < 2``)."""
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def policy_loss(log_probs: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """``-mean(A * log pi(a|s))``: descending it raises ``log pi`` where ``A > 0``.

    Args:
        log_probs: ``(B,)`` log-probabilities of the taken actions (differentiable).
        advantages: ``(B,)`` treated as constants (detached).
    """
    return -(advantages.detach() * log_probs).mean()


def value_loss(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """``mean((R - V)^2)`` over ``(B,)`` values and (constant) n-step returns."""
    return F.mse_loss(values, returns.detach())


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy ``-sum_a pi(a|s) log pi(a|s)`` of categorical policies ``(B, n_actions)``."""
    log_p = F.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1).mean()


def a2c_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             returns: torch.Tensor, advantages: torch.Tensor, value_coef: float,
             entropy_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """``policy_loss + value_coef * value_loss - entropy_coef * entropy`` over ``B`` samples.

    Args:
        logits: ``(B, n_actions)``; values, returns, advantages: ``(B,)``; actions: ``(B,)`` int64.

    Returns:
        The scalar loss and its parts as floats.
    """
    log_probs = F.log_softmax(logits, dim=-1).gather(1, actions[:, None]).squeeze(1)
    parts = {"policy": policy_loss(log_probs, advantages), "value": value_loss(values, returns),
             "entropy": entropy(logits)}
    total = parts["policy"] + value_coef * parts["value"] - entropy_coef * parts["entropy"]
    return total, {k: float(v.detach()) for k, v in parts.items()}


class A2CReport(NamedTuple):
    """The loss parts of the last gradient :meth:`A2CLearner.compute_gradient` computed."""

    loss: float  # policy + value_coef * value - entropy_coef * entropy
    policy: float
    value: float
    entropy: float


class A2CLearner(ActorCriticState):
    """Owns an :class:`ActorCritic` and its Adam optimiser; gradients travel as flat arrays.

    Args:
        obs_dim, n_actions: Sizes.
        config: The run's settings.
    """

    def __init__(self, obs_dim: int, n_actions: int, config: A2CConfig) -> None:
        self.config = config
        self.net = ActorCritic(obs_dim, n_actions, config.hidden)
        self.optimizer = make_adam(self.net.parameters(), config.learning_rate)
        self.updates = 0
        self.last_report = A2CReport(math.nan, math.nan, math.nan, math.nan)

    def compute_gradient(self, fragment: Fragment) -> np.ndarray:
        """The clipped gradient of :func:`a2c_loss` on ``fragment``'s real steps, as one flat
        float32 array ``(num_parameters,)`` (parameter order of ``net.parameters()``). Weights
        unchanged.

        The n-step returns run over the whole ``(T, N)`` grid, bootstrapping from
        ``V(next_obs)`` at a truncation and after the last row; the loss and the advantage
        normalisation then take only the real steps (reset rows left out, see
        :class:`rlkit.envs.runner.Fragment`)."""
        cfg = self.config
        t, n = fragment.rewards.shape
        logits, values = self.net(torch.as_tensor(fragment.obs.reshape(t * n, -1)))
        with torch.no_grad():
            _, next_values = self.net(torch.as_tensor(fragment.next_obs.reshape(t * n, -1)))
        next_values = next_values.numpy().reshape(t, n)
        returns, adv = nstep_advantages(
            fragment.rewards, values.detach().numpy().reshape(t, n), fragment.terminations,
            fragment.truncations, next_values, next_values[-1], cfg.gamma)
        real = torch.as_tensor(~fragment.resets.reshape(-1))
        adv_t = torch.as_tensor(adv.reshape(-1), dtype=torch.float32)[real]
        if cfg.normalize_advantages:
            adv_t = normalize_advantages(adv_t)
        loss, parts = a2c_loss(
            logits[real], values[real], torch.as_tensor(fragment.actions.reshape(-1))[real],
            torch.as_tensor(returns.reshape(-1), dtype=torch.float32)[real], adv_t,
            cfg.value_coef, cfg.entropy_coef)
        self.last_report = A2CReport(float(loss.detach()), **parts)
        self.net.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), cfg.max_grad_norm)
        return torch.cat([p.grad.reshape(-1) for p in self.net.parameters()]).numpy().copy()

    def apply_gradient(self, flat: np.ndarray) -> None:
        """One Adam step with ``flat`` ``(num_parameters,)`` as the gradient."""
        flat_t = torch.as_tensor(np.ascontiguousarray(flat, dtype=np.float32))
        offset = 0
        for p in self.net.parameters():
            p.grad = flat_t[offset: offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        if offset != flat_t.numel():
            raise ValueError(f"gradient has {flat_t.numel()} entries, the network {offset}")
        self.optimizer.step()
        self.updates += 1
