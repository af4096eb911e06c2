"""PPO (Schulman et al., 2017): the clipped surrogate objective over GAE(lambda) advantages,
with several epochs of minibatch SGD over each batch of fragments; and APPO, the same learner
fed by IMPALA's asynchronous workers, with V-trace targets.

Most of it is A2C's and IMPALA's: the network (A2C's categorical :class:`ActorCritic`, or for
continuous actions a Gaussian one: :mod:`rlkit.algos.policy_heads`), the acting policy, the
value and entropy terms, advantage normalisation, the returns (GAE is :func:`nstep_advantages`
with ``lam < 1``), V-trace, and every setting of :class:`IMPALAConfig`, which
:class:`PPOConfig` extends. What PPO adds is the surrogate (:func:`clipped_surrogate`) and
reusing one batch for ``epochs`` passes, which the clip makes safe. The learner is plain torch
and has :class:`VTraceLearner`'s interface, so IMPALA's loops run it unchanged:
:func:`rlkit.train.ppo.train_ppo` in one process, the actor-learner queue driver under Ray
(synchronous: PPO; asynchronous: APPO).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from rlkit.algos.a2c import normalize_advantages, nstep_advantages, value_loss
from rlkit.algos.actor_critic import ActorCriticState
from rlkit.algos.impala import IMPALAConfig, next_state_values, stack_fragments
from rlkit.algos.policy_heads import action_kind_of, evaluate_actions, make_actor_critic
from rlkit.algos.vtrace import vtrace
from rlkit.core.gradients import GradientSync, gradient_step, no_sync
from rlkit.core.networks import make_adam
from rlkit.core.spaces import ObsSpec
from rlkit.core.types import ActionKind
from rlkit.core.validation import fail, flag, integer, number
from rlkit.envs.runner import Fragment


@dataclass(frozen=True)
class PPOConfig(IMPALAConfig):
    """Settings of a PPO or APPO run: every :class:`IMPALAConfig` setting (workers, fragments,
    the queue, the coefficients), PPO's defaults for them, and PPO's own. Invalid values raise
    ``ValueError`` naming the field and the fix.

    One batch is ``batch_fragments`` fragments of ``unroll_length`` steps of
    ``envs_per_worker`` environments; the learner makes ``epochs`` passes over its real steps,
    each in ``ceil(steps_per_batch / minibatch_size)`` shuffled minibatches, then publishes.
    ``synchronous=True`` (the default) is PPO: every fragment of a batch was collected by the
    weights being trained. ``synchronous=False`` is APPO: workers never wait, fragments arrive
    a few versions old, and ``use_vtrace=True`` corrects the targets for it. The defaults are
    notebook 08's CartPole-v1 settings (the same for every seed); in one process the
    ``num_workers`` runners are stepped in turn.
    """

    num_workers: int = integer(2, 1)
    envs_per_worker: int = integer(4, 1)
    unroll_length: int = integer(32, 1)
    batch_fragments: int = integer(2, 1)
    queue_size: int = integer(4, 1)
    learning_rate: float = number(1e-3, above=0)
    gamma: float = number(0.98, at_least=0, below=1)
    entropy_coef: float = number(0.0, at_least=0)
    max_grad_norm: float = number(0.5, above=0)
    use_vtrace: bool = flag(False)  # APPO: V-trace targets and advantages instead of GAE
    synchronous: bool = flag(True)  # False: APPO
    total_steps: int = integer(100_000, 1)
    eval_every: int = integer(5_000, 1)
    epochs: int = integer(10, 1)  # passes of SGD over each batch
    minibatch_size: int = integer(64, 1)  # env steps per SGD step (the grid's, reset rows too)
    clip: float = number(0.2, above=0)  # the ratio counts only inside [1 - clip, 1 + clip]
    gae_lambda: float = number(0.8, at_least=0, at_most=1)  # GAE's lambda (not with V-trace)
    normalize_advantages: bool = flag(True)  # per minibatch

    def check(self) -> None:
        super().check()
        if self.use_vtrace and self.synchronous:
            fail("use_vtrace", self.use_vtrace, "with synchronous=True: a synchronous run has no "
                 "policy lag for V-trace to correct, and V-trace would replace GAE (gae_lambda "
                 "unused)", "keep use_vtrace=False for PPO, or pass synchronous=False as well "
                 "for APPO")
        default_lambda = next(f.default for f in dataclasses.fields(self)
                              if f.name == "gae_lambda")
        if self.use_vtrace and self.gae_lambda != default_lambda:
            warnings.warn(f"gae_lambda={self.gae_lambda} has no effect with use_vtrace=True: "
                          f"V-trace's targets take the place of GAE. Fix: leave gae_lambda at "
                          f"its default, or set use_vtrace=False to use it.", stacklevel=5)
        default_envs = next(f.default for f in dataclasses.fields(self)
                            if f.name == "minibatch_envs")
        if self.minibatch_envs != default_envs:
            fail("minibatch_envs", self.minibatch_envs, "is IMPALA's split of an update into "
                 "whole env columns; PPO and APPO shuffle env steps into minibatches",
                 "set minibatch_size (env steps per SGD step) instead")
        if self.minibatch_size > self.steps_per_batch:
            fail("minibatch_size", self.minibatch_size, f"is larger than one batch "
                 f"(batch_fragments * unroll_length * envs_per_worker = {self.steps_per_batch}"
                 " env steps), so no minibatch could be filled",
                 f"use minibatch_size <= {self.steps_per_batch}, e.g. "
                 f"{max(1, self.steps_per_batch // 4)} (four minibatches per epoch)")

    @property
    def algorithm(self) -> str:
        """``"PPO"`` (synchronous) or ``"APPO"``."""
        return "PPO" if self.synchronous else "APPO"

    @property
    def action_kind(self) -> ActionKind:
        """The env's: PPO and APPO act on discrete actions (categorical head) or a 1-D box
        (Gaussian head)."""
        return action_kind_of(self.env_id)

    def make_learner(self, obs_dim: int | ObsSpec, n_actions: int,
                     device: str | torch.device = "cpu") -> PPOLearner:
        return PPOLearner(obs_dim, n_actions, self, device)

    @property
    def steps_per_batch(self) -> int:
        """Env steps (reset rows included) in one batch: ``batch_fragments * unroll_length *
        envs_per_worker``."""
        return self.batch_fragments * self.steps_per_fragment

    @property
    def minibatches(self) -> int:
        """SGD steps per epoch, the same on every rank of a learner group (their gradients
        are averaged step by step): ``ceil(steps_per_batch / minibatch_size)``."""
        return -(-self.steps_per_batch // self.minibatch_size)


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


def ppo_loss(log_probs: torch.Tensor, entropies: torch.Tensor, values: torch.Tensor,
             old_log_probs: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor,
             config: PPOConfig) -> tuple[torch.Tensor, dict[str, float]]:
    """``clipped_surrogate + value_coef * value_loss - entropy_coef * entropy`` on a minibatch.

    The value loss is A2C's plain ``mean((R - V)^2)``, not clipped: clipping the value update
    around the old values (as the PPO code of OpenAI's baselines does) did not help and often
    hurt in the large study of Andrychowicz et al. (2021, "What matters in on-policy RL"),
    and its range, in units of return, would need retuning with the reward scale.

    Args:
        log_probs, entropies, values: ``(B,)`` under the weights being trained
            (differentiable; :func:`rlkit.algos.policy_heads.evaluate_actions`).
        old_log_probs, advantages, returns: ``(B,)`` constants.
        config: ``clip``, the coefficients, ``normalize_advantages``.

    Returns:
        The scalar loss and its three parts as floats.
    """
    if config.normalize_advantages:
        advantages = normalize_advantages(advantages)
    parts = {"policy": clipped_surrogate(log_probs, old_log_probs, advantages, config.clip),
             "value": value_loss(values, returns), "entropy": entropies.mean()}
    total = (parts["policy"] + config.value_coef * parts["value"]
             - config.entropy_coef * parts["entropy"])
    return total, {k: float(v.detach()) for k, v in parts.items()}


@torch.no_grad()
def policy_shift(log_probs: torch.Tensor, old_log_probs: torch.Tensor, clip: float
                 ) -> dict[str, float]:
    """How far the policy moved from the one that acted, over ``(B,)`` samples:
    ``approx_kl``, the estimator ``mean((r - 1) - log r)`` of ``KL(pi_old || pi)`` (>= 0, 0
    only if nothing moved), and ``clip_fraction``, the share of ratios ``r`` outside
    ``[1 - clip, 1 + clip]`` (where a sample whose advantage favoured that move stops
    pushing)."""
    log_ratio = log_probs - old_log_probs
    ratio = log_ratio.exp()
    return {"approx_kl": float((ratio - 1 - log_ratio).mean()),
            "clip_fraction": float(((ratio - 1).abs() > clip).float().mean())}


class PPOReport(NamedTuple):
    """What one PPO update reports (the loss parts averaged over the last epoch's minibatches,
    and how far the whole batch's policy moved)."""

    loss: float  # policy + value_coef * value - entropy_coef * entropy
    policy: float  # the clipped surrogate's loss
    value: float
    entropy: float
    approx_kl: float  # :func:`policy_shift`
    clip_fraction: float


class PPOLearner(ActorCriticState):
    """Owns the actor-critic (categorical or Gaussian, by the env's action space:
    :func:`rlkit.algos.policy_heads.make_actor_critic`) and its Adam optimiser; :meth:`update`
    takes one batch of fragments (the interface of :class:`VTraceLearner`, so IMPALA's loops
    and roles run it).

    ``updates`` counts batches learned, the policy *version* (weights after ``k`` batches are
    version ``k``); ``sgd_steps`` counts optimiser steps (``epochs * config.minibatches``).
    """

    def __init__(self, obs_dim: int | ObsSpec, n_actions: int, config: PPOConfig,
                 device: str | torch.device = "cpu") -> None:
        torch.manual_seed(config.seed)
        self.config, self.device = config, torch.device(device)
        self.net = make_actor_critic(obs_dim, n_actions, config.hidden,
                                     action_kind_of(config.env_id),
                                     config.shared_encoder).to(self.device)
        self.optimizer = make_adam(self.net.parameters(), config.learning_rate)
        self.updates = 0
        self.sgd_steps = 0
        self.shuffle = torch.Generator().manual_seed(config.seed)
        self.sync_gradients: GradientSync = no_sync  # average_gradients in a group

    def state_dict(self) -> dict[str, Any]:
        """:class:`ActorCriticState`'s, plus the SGD step count and the minibatch shuffle's
        random stream (a resumed run draws the minibatches the run never stopped draws)."""
        return super().state_dict() | {"sgd_steps": self.sgd_steps,
                                       "shuffle": self.shuffle.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if "shuffle" in state:  # (a checkpoint from before they were saved has neither)
            self.sgd_steps = int(state["sgd_steps"])
            self.shuffle.set_state(state["shuffle"])

    @torch.no_grad()
    def targets(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(value targets, advantages)``, each ``(T, M)`` float32, from the weights before
        this batch's first step: GAE(``gae_lambda``) (:func:`nstep_advantages`), or with
        ``use_vtrace`` V-trace's ``v_s`` and ``r_s + gamma v_{s+1} - V(x_s)`` (APPO: the data
        may come from older policies)."""
        cfg = self.config
        T, M = batch["rewards"].shape
        log_pi, _, values = evaluate_actions(self.net, batch["obs"].flatten(0, 1),
                                             batch["actions"].flatten(0, 1))
        values = values.reshape(T, M)
        final = next_state_values(self.net, batch)
        if cfg.use_vtrace:
            out = vtrace(batch["log_probs"], log_pi.reshape(T, M), batch["rewards"], values,
                         final[-1], cfg.gamma * (1.0 - batch["terminations"]), cfg.rho_bar,
                         cfg.c_bar, batch["truncations"], final)
            return out.vs, out.advantages
        host = [x.cpu().numpy() for x in (batch["rewards"], values, batch["terminations"],
                                          batch["truncations"], final)]  # GAE runs on the host
        returns, adv = nstep_advantages(*host, host[-1][-1], cfg.gamma, cfg.gae_lambda)
        return (torch.as_tensor(returns, dtype=torch.float32, device=self.device),
                torch.as_tensor(adv, dtype=torch.float32, device=self.device))

    def update(self, fragments: Sequence[Fragment]) -> PPOReport:
        """``epochs`` passes of shuffled minibatch SGD over the real steps of ``fragments``
        (reset rows left out), ``config.minibatches`` steps per pass.

        Returns:
            A :class:`PPOReport`: the loss parts averaged over the last epoch's minibatches,
            their ``loss``, and :func:`policy_shift` of the whole batch after the last epoch.
        """
        cfg = self.config
        batch = stack_fragments(fragments, self.device)
        returns, adv = self.targets(batch)
        real = ~batch["resets"]
        obs, actions = batch["obs"][real], batch["actions"][real]
        old_log_probs, returns, adv = batch["log_probs"][real], returns[real], adv[real]
        last: list[dict[str, float]] = []
        for epoch in range(cfg.epochs):
            order = torch.randperm(len(actions), generator=self.shuffle)
            last = []
            # min: never an empty minibatch (only a batch of almost nothing but reset rows
            # has fewer real steps than minibatches)
            for idx in torch.tensor_split(order, min(cfg.minibatches, len(order))):
                log_probs, entropies, values = evaluate_actions(self.net, obs[idx], actions[idx])
                loss, metrics = ppo_loss(log_probs, entropies, values, old_log_probs[idx],
                                         adv[idx], returns[idx], cfg)
                if not math.isfinite(float(loss.detach())):
                    raise FloatingPointError(
                        f"PPO loss became non-finite at batch {self.updates}, epoch {epoch}: "
                        f"{metrics}; largest |reward| in the batch "
                        f"{float(batch['rewards'].abs().max()):.3g}. Fix: rewards that large "
                        f"(or not finite) must be scaled down (or cleaned) first; else lower "
                        f"learning_rate or max_grad_norm.")
                gradient_step(self.optimizer, loss, self.net.parameters(), self.sync_gradients,
                              cfg.max_grad_norm)
                self.sgd_steps += 1
                last.append(metrics)
        self.updates += 1
        out = {k: float(np.mean([m[k] for m in last])) for k in last[0]}
        out["loss"] = (out["policy"] + cfg.value_coef * out["value"]
                       - cfg.entropy_coef * out["entropy"])
        with torch.no_grad():
            log_probs = evaluate_actions(self.net, obs, actions)[0]
        return PPOReport(**out, **policy_shift(log_probs, old_log_probs, cfg.clip))


#: PPO on Pendulum-v1 (continuous actions: a Gaussian policy), the same for every seed: the RL
#: Baselines3 Zoo's settings for the task (4 envs x 1,024 steps a batch, lambda 0.95, gamma
#: 0.9, 10 epochs, learning rate 1e-3, clip 0.2, no entropy bonus) with minibatches of 64 and
#: without its state-dependent exploration (gSDE). Solved: a deterministic evaluation of 10
#: episodes with a mean of at least -200.
PENDULUM = PPOConfig(env_id="Pendulum-v1", num_workers=2, envs_per_worker=2, unroll_length=1024,
                     batch_fragments=2, gamma=0.9, gae_lambda=0.95, total_steps=200_000,
                     eval_every=10_000, eval_episodes=10, target_return=-200.0)

#: PPO on Breakout-MinAtar from its frames (notebook 09), the same for every seed: 2 runners of
#: 8 envs x 64 steps (a batch of 1,024 frames), 4 epochs of minibatches of 256, learning rate
#: 1e-3, gamma 0.99, lambda 0.95, an entropy bonus of 0.01, one hidden layer of 128 over the
#: MinAtar encoder; greedy evaluations of 20 episodes every 10,000 frames, no target (a run
#: gives one with ``target_return``). Chosen in short runs on a 2-core CPU (a greedy mean of 5,
#: ten times random play, within 50,000-130,000 frames), not tuned further.
BREAKOUT_MINATAR = PPOConfig(env_id="rlkit/BreakoutMinAtar-v0", num_workers=2, envs_per_worker=8,
                             unroll_length=64, batch_fragments=2, queue_size=4, epochs=4,
                             minibatch_size=256, learning_rate=1e-3, gamma=0.99, gae_lambda=0.95,
                             entropy_coef=0.01, hidden=(128,), total_steps=1_000_000,
                             eval_every=10_000, eval_episodes=20, target_return=None)
#: APPO on the same: :data:`BREAKOUT_MINATAR` run asynchronously with V-trace targets (which
#: take the place of GAE, so ``gae_lambda`` is left at its default).
BREAKOUT_MINATAR_APPO = dataclasses.replace(
    BREAKOUT_MINATAR, synchronous=False, use_vtrace=True,
    gae_lambda=next(f.default for f in dataclasses.fields(PPOConfig) if f.name == "gae_lambda"))
#: APPO on Atari Pong from 84x84 stacks (``benchmarks/pong.py``, target 18): the Nature conv net,
#: shared by the policy and the value (``shared_encoder``, as in the PPO paper's Atari network),
#: fragments of 128 steps of 8 envs, PPO's Atari settings (clip 0.1, lr 2.5e-4, 4 epochs).
#: With a conv net of its own for each (the default), the one 1.4M-step run on an H100
#: (``benchmarks/results/pong_h100.json``) learned a value (loss 0.137 -> 0.065) while its
#: policy stayed near uniform (entropy 1.788 -> 1.773 of 1.792): features learned from the
#: policy gradient alone. Shared, the value's regression trains the features the policy reads
#: (and the learner runs one conv net, not two: 1.8x the updates/s on a CPU); whether that
#: reaches 18 is for the next run on a GPU machine to show.
PONG_APPO = PPOConfig(env_id="Atari/Pong-v5", synchronous=False, use_vtrace=True, num_workers=2,
                      envs_per_worker=8, unroll_length=128, batch_fragments=2, queue_size=4,
                      epochs=4, minibatch_size=256, learning_rate=2.5e-4, gamma=0.99, clip=0.1,
                      entropy_coef=0.01, hidden=(512,), shared_encoder=True,
                      total_steps=10_000_000,
                      eval_every=200_000, eval_episodes=10, target_return=18.0)
