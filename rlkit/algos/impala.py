"""IMPALA: config, the V-trace loss, and the learner (the network and the policies are A2C's).

The learner is plain torch and knows nothing of Ray: :func:`rlkit.train.impala.train_impala`
runs it in one process (with a simulated policy lag), and :mod:`rlkit.distributed.impala.driver`
runs it as an actor fed by a bounded trajectory queue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.algos.a2c import ActorCritic
from rlkit.algos.vtrace import nstep_returns, vtrace
from rlkit.core.config_checks import fail, require_hidden, require_ints, require_positive_finite
from rlkit.core.networks import load_numpy_weights, make_adam, module_weights
from rlkit.core.types import Weights
from rlkit.envs.make import check_env_id
from rlkit.envs.runner import Fragment, check_fragment


@dataclass(frozen=True)
class IMPALAConfig:
    """Settings of an IMPALA run. Invalid values raise ``ValueError`` naming the field and the fix.

    The defaults are the CartPole-v1 settings of notebook 06 (same for every seed).
    """

    env_id: str = "CartPole-v1"
    seed: int = 0
    num_workers: int = 2
    envs_per_worker: int = 16  # N: envs each actor steps in lockstep
    unroll_length: int = 32  # T: steps per env in one trajectory fragment
    batch_fragments: int = 8  # B: fragments per learner update
    queue_size: int = 16  # fragments the queue holds before actors must wait
    learning_rate: float = 1e-3
    gamma: float = 0.99
    entropy_coef: float = 0.01
    value_coef: float = 0.5
    max_grad_norm: float = 40.0
    rho_bar: float = 1.0
    c_bar: float = 1.0
    use_vtrace: bool = True  # False: plain n-step advantages, no importance weights
    synchronous: bool = False  # True: actors wait for every new version (policy lag 0)
    hidden: tuple[int, ...] = (64, 64)
    total_steps: int = 1_000_000  # env-step budget; training stops earlier once solved
    eval_every: int = 20_000  # env steps between greedy evaluations
    eval_episodes: int = 20
    target_return: float | None = 475.0  # stop at the first greedy eval reaching it

    def __post_init__(self) -> None:
        check_env_id(self.env_id)
        require_ints(self, ("num_workers", "envs_per_worker", "unroll_length", "batch_fragments",
                            "queue_size", "total_steps", "eval_every", "eval_episodes"), 1)
        require_ints(self, ("seed",), 0)
        require_positive_finite(self, ("learning_rate",), "1e-3")
        require_positive_finite(self, ("max_grad_norm",), "40.0")
        require_hidden(self)
        if not 0 <= self.gamma < 1:
            fail("gamma", self.gamma, "must be in [0, 1)", "use a discount such as 0.99")
        for name, example in (("entropy_coef", 0.01), ("value_coef", 0.5)):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                fail(name, value, "must be a finite number >= 0", f"use e.g. {name}={example}")
        if not (isinstance(self.c_bar, int | float) and self.c_bar >= 0):
            fail("c_bar", self.c_bar, "must be a number >= 0", "use c_bar=1.0 as the paper does")
        if not self.c_bar <= self.rho_bar:
            fail("rho_bar", self.rho_bar, f"is below c_bar={self.c_bar} (V-trace needs "
                 "rho_bar >= c_bar >= 0)", "raise rho_bar to at least c_bar, e.g. both 1.0")
        if self.queue_size < self.batch_fragments:
            fail("queue_size", self.queue_size, f"is below batch_fragments="
                 f"{self.batch_fragments}, so the learner could never fill a batch",
                 "make queue_size >= batch_fragments")
        if self.synchronous and self.batch_fragments % self.num_workers:
            fail("batch_fragments", self.batch_fragments, f"is not a multiple of num_workers="
                 f"{self.num_workers}, which a synchronous run needs (each actor sends the same "
                 "number of fragments per version)", "use e.g. batch_fragments=2 * num_workers")

    @property
    def steps_per_fragment(self) -> int:
        return self.unroll_length * self.envs_per_worker


def stack_fragments(fragments: Sequence[Fragment]) -> dict[str, torch.Tensor]:
    """``B`` fragments of ``(T, N)`` steps -> tensors of ``(T, B*N)`` (side by side).

    Keys: ``obs``/``next_obs`` ``(T, B*N, obs_dim)``, ``actions``, ``rewards``,
    ``terminations``, ``truncations``, ``log_probs`` (behaviour) and ``resets`` (bool), each
    ``(T, B*N)``.
    """
    for fragment in fragments:
        check_fragment(fragment, need_log_probs=True)
    lengths = {f.obs.shape[0] for f in fragments}
    if len(lengths) != 1:
        raise ValueError(f"the fragments have different lengths T={sorted(lengths)}. Fix: "
                         f"give every actor the same unroll_length.")
    names = ("obs", "actions", "rewards", "terminations", "truncations", "next_obs",
             "log_probs", "resets")
    return {n: torch.as_tensor(np.concatenate([getattr(f, n) for f in fragments], axis=1))
            for n in names}


def impala_loss(net: ActorCritic, batch: dict[str, torch.Tensor], config: IMPALAConfig
                ) -> tuple[torch.Tensor, dict[str, float]]:
    """Policy-gradient, value and entropy losses on a time-major batch.

    ``loss = -mean(A_s * log pi(a_s|x_s)) + value_coef * 0.5 * mean((v_s - V(x_s))^2)
    - entropy_coef * mean(H(pi(.|x_s)))``, with ``v_s``, ``A_s`` from V-trace (or plain n-step
    returns when ``config.use_vtrace`` is false). Targets carry no gradient. The targets run
    over the whole grid; the means take only real steps (reset rows are masked out).

    Args:
        net: The learner's network.
        batch: From :func:`stack_fragments`: ``obs``/``next_obs`` ``(T, M, obs_dim)``, the
            rest ``(T, M)``.
        config: Discount, coefficients, ``rho_bar``/``c_bar``.

    Returns:
        The scalar loss and a dict of float metrics.
    """
    T, M = batch["actions"].shape
    logits, values = net(batch["obs"].reshape(T * M, -1))
    log_probs_all = F.log_softmax(logits, dim=-1)
    target_log_probs = log_probs_all.gather(1, batch["actions"].reshape(-1, 1)).reshape(T, M)
    values = values.reshape(T, M)
    with torch.no_grad():  # V of next_obs is needed only after the last step and truncations
        next_values = torch.zeros(T, M)
        rows = batch["truncations"] > 0
        rows[-1] = True
        next_values[rows] = net.critic(batch["next_obs"][rows]).squeeze(-1)
    discounts = config.gamma * (1.0 - batch["terminations"])
    behaviour = batch["log_probs"]
    if config.use_vtrace:
        targets = vtrace(behaviour, target_log_probs.detach(), batch["rewards"], values.detach(),
                         next_values[-1], discounts, config.rho_bar, config.c_bar,
                         batch["truncations"], next_values)
    else:
        targets = nstep_returns(batch["rewards"], values.detach(), next_values[-1], discounts,
                                batch["truncations"], next_values)
    real = ~batch["resets"]
    pg_loss = -(targets.pg_advantages * target_log_probs)[real].mean()
    value_loss = 0.5 * (targets.vs - values)[real].pow(2).mean()
    entropy = -(log_probs_all.exp() * log_probs_all).sum(-1).reshape(T, M)[real].mean()
    loss = pg_loss + config.value_coef * value_loss - config.entropy_coef * entropy
    ratio = (target_log_probs.detach() - behaviour).exp()[real]
    return loss, {"loss": loss.item(), "pg_loss": pg_loss.item(),
                  "value_loss": value_loss.item(), "entropy": entropy.item(),
                  "mean_ratio": ratio.mean().item(),
                  "clipped_fraction": (ratio > config.rho_bar).float().mean().item()}


class VTraceLearner:
    """Owns the network and its optimiser; one :meth:`update` per batch of ``B`` fragments.

    ``updates`` is also the policy *version*: the weights after ``k`` updates are version ``k``.
    """

    def __init__(self, obs_dim: int, n_actions: int, config: IMPALAConfig) -> None:
        torch.manual_seed(config.seed)
        self.config = config
        self.net = ActorCritic(obs_dim, n_actions, config.hidden)
        self.optimizer = make_adam(self.net.parameters(), config.learning_rate)
        self.updates = 0

    def update(self, fragments: Sequence[Fragment]) -> dict[str, float]:
        """One gradient step on ``B`` fragments; returns the loss metrics."""
        loss, metrics = impala_loss(self.net, stack_fragments(fragments), self.config)
        if not math.isfinite(metrics["loss"]):
            raise FloatingPointError(f"IMPALA loss became non-finite at update {self.updates}: "
                                     f"{metrics}. Fix: lower learning_rate or max_grad_norm.")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        self.updates += 1
        return metrics

    def get_weights(self) -> Weights:
        return module_weights(self.net)

    def set_weights(self, weights: Weights) -> None:
        load_numpy_weights(self.net, weights)
