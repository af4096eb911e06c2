"""IMPALA: config, the V-trace loss, and the learner (the network and the policies are A2C's).

The learner is plain torch and knows nothing of Ray: :func:`rlkit.train.impala.train_impala`
runs it in one process (with a simulated policy lag), and :mod:`rlkit.distributed.impala.driver`
runs it as an actor fed by a bounded fragment queue.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from rlkit.algos.actor_critic import ActorCritic, ActorCriticState
from rlkit.algos.vtrace import nstep_returns, vtrace
from rlkit.core.gradients import GradientSync, gradient_step, no_sync
from rlkit.core.networks import make_adam
from rlkit.core.spaces import ObsSpec
from rlkit.core.validation import (SEED_MAX, Validated, fail, flag, integer, layers, number,
                                   text)
from rlkit.core.types import ActionKind
from rlkit.envs.make import check_env_id
from rlkit.envs.runner import Fragment, check_fragment


#: A full queue makes each fragment ``queue_size / batch_fragments`` updates old when the learner
#: takes it. Above this many, V-trace truncates most importance weights at ``rho_bar`` and its
#: correction degrades to clipping: the config warns (and the run warns if its measured mean lag
#: is above it).
WARN_QUEUE_UPDATES = 8
#: Above this many updates of lag a full queue would feed the learner data from a policy long
#: gone: the config is refused.
MAX_QUEUE_UPDATES = 64


def check_queue_staleness(queue_size: int, batch_fragments: int) -> None:
    """Warn about (above :data:`WARN_QUEUE_UPDATES`) or refuse (above
    :data:`MAX_QUEUE_UPDATES`) a queue whose contents, when full, are that many updates old."""
    lag = queue_size / batch_fragments
    fix = (f"keep queue_size <= {WARN_QUEUE_UPDATES} * batch_fragments = "
           f"{WARN_QUEUE_UPDATES * batch_fragments} (the default holds 2 updates' worth)")
    if lag > MAX_QUEUE_UPDATES:
        fail("queue_size", queue_size, f"holds {lag:g} updates' worth of fragments (batch_"
             f"fragments={batch_fragments}): a full queue would train on data {lag:g} policy "
             f"versions old, past what V-trace can correct", fix)
    if lag > WARN_QUEUE_UPDATES:
        warnings.warn(f"queue_size={queue_size} holds {lag:g} updates' worth of fragments: when "
                      f"it fills, the learner trains on data up to {lag:g} versions old and "
                      f"V-trace clips most importance weights. Fix: {fix}.", stacklevel=4)


@dataclass(frozen=True)
class IMPALAConfig(Validated):
    """Settings of an IMPALA run. Invalid values raise ``ValueError`` naming the field and the fix.

    The defaults are the CartPole-v1 settings of notebook 06 (same for every seed). An update
    takes ``minibatches`` SGD steps on ``minibatch_envs`` env columns each (16 of 8 with the
    defaults), not one step on the whole batch: with one step per 4,096 env steps, some seeds
    wander below 250 for the rest of a 1M-step budget; the learning rate of 5e-4, not 1e-3, makes
    a solved policy collapse less often (``benchmarks/impala_stability.py`` measures both).

    A full queue holds ``queue_size / batch_fragments`` updates' worth of fragments, each that
    many updates old when consumed: above :data:`WARN_QUEUE_UPDATES` a warning says V-trace will
    be clipping most of its importance weights; above :data:`MAX_QUEUE_UPDATES` the config is
    refused.
    """

    env_id: str = text("CartPole-v1")
    seed: int = integer(0, 0, SEED_MAX)
    num_workers: int = integer(2, 1)
    envs_per_worker: int = integer(16, 1)  # N: envs each actor steps in lockstep
    unroll_length: int = integer(32, 1)  # T: steps per env in one trajectory fragment
    batch_fragments: int = integer(8, 1)  # B: fragments per learner update
    minibatch_envs: int = integer(8, 1)  # env columns (T steps each) per SGD step of an update
    queue_size: int = integer(16, 1)  # fragments the queue holds before actors must wait
    learning_rate: float = number(5e-4, above=0)
    gamma: float = number(0.99, at_least=0, below=1)
    entropy_coef: float = number(0.01, at_least=0)
    value_coef: float = number(0.5, at_least=0)
    max_grad_norm: float = number(40.0, above=0)
    rho_bar: float = number(1.0, above=0)
    c_bar: float = number(1.0, at_least=0)
    use_vtrace: bool = flag(True)  # False: plain n-step advantages, no importance weights
    synchronous: bool = flag(False)  # True: actors wait for every new version (policy lag 0)
    hidden: tuple[int, ...] = layers((64, 64))
    shared_encoder: bool = flag(False)  # frames: one conv encoder under the policy and value
    total_steps: int = integer(1_000_000, 1)  # env-step budget; stops earlier once solved
    eval_every: int = integer(20_000, 1)  # env steps between greedy evaluations
    eval_episodes: int = integer(20, 1)
    target_return: float | None = number(475.0, optional=True)  # stop at the first eval >= it

    def check(self) -> None:
        check_env_id(self.env_id)
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
        check_queue_staleness(self.queue_size, self.batch_fragments)

    @property
    def steps_per_fragment(self) -> int:
        return self.unroll_length * self.envs_per_worker

    # the on-policy spec (rlkit.core.types.OnPolicyAlgorithm): what this config trains, said by
    # the config itself (PPOConfig overrides all three), never by an isinstance in a loop
    @property
    def algorithm(self) -> str:
        """What this config trains, in progress bars, roles' errors and checkpoints."""
        return "IMPALA"

    @property
    def action_kind(self) -> ActionKind:
        """``"discrete"``: IMPALA's learner is categorical (another env is refused where it is
        built, naming the field)."""
        return "discrete"

    @property
    def images(self) -> bool:
        """Whether it takes image observations: yes (the network's encoder follows the env's
        observation, :func:`rlkit.core.networks.encoded_mlp`)."""
        return True

    def make_learner(self, obs_dim: int | ObsSpec, n_actions: int,
                     device: str | torch.device = "cpu") -> VTraceLearner:
        """The learner of what this config trains, on ``device``; it takes
        ``update(fragments)``."""
        return VTraceLearner(obs_dim, n_actions, self, device)

    @property
    def minibatches(self) -> int:
        """SGD steps per update, the same on every rank of a learner group (their gradients
        are averaged step by step): the batch's ``B * N`` env columns in groups of
        ``minibatch_envs``, ``ceil(B * N / minibatch_envs)``."""
        return -(-self.batch_fragments * self.envs_per_worker // self.minibatch_envs)


#: IMPALA on Breakout-MinAtar from its frames (notebook 09): the runners of PPO's settings there
#: (:data:`rlkit.algos.ppo.BREAKOUT_MINATAR`: 8 envs x 64 steps, batches of 2 fragments, 1,024
#: frames), but one SGD step on each whole batch where PPO takes 16; learning rate 2e-3,
#: gradients clipped at a norm of 0.5, one hidden layer of 128 over the MinAtar encoder, and an
#: entropy bonus of 0.02, twice PPO's: at 0.01, one run in 16 ended its 800,000 frames at a
#: greedy mean of 0 (in another trial, at lr 1e-3, such a fall, from 4.7 to 0.1, came with the
#: policy's entropy falling to about half). Greedy evaluations of 20 episodes
#: every 10,000 frames, no target (a run gives one with ``target_return``). Chosen in short runs
#: on a 2-core CPU (with 0.02, a greedy mean of 5 within 133,000-360,000 frames in each of 12
#: runs, 9 with 2 workers and 3 with 1), not tuned further.
BREAKOUT_MINATAR = IMPALAConfig(env_id="rlkit/BreakoutMinAtar-v0", num_workers=2,
                                envs_per_worker=8, unroll_length=64, batch_fragments=2,
                                minibatch_envs=16, queue_size=4, learning_rate=2e-3,
                                max_grad_norm=0.5, entropy_coef=0.02, hidden=(128,),
                                total_steps=1_000_000, eval_every=10_000, eval_episodes=20,
                                target_return=None)


def stack_fragments(fragments: Sequence[Fragment], device: str | torch.device = "cpu"
                    ) -> dict[str, torch.Tensor]:
    """``B`` fragments of ``(T, N)`` steps -> tensors of ``(T, B*N)`` (side by side), on
    ``device`` (frames cross to a GPU as uint8, a quarter of float32's bytes).

    Keys: ``obs``/``next_obs`` ``(T, B*N, *obs_shape)`` (frames stay uint8), ``actions``,
    ``rewards``, ``terminations``, ``truncations``, ``log_probs`` (behaviour) and ``resets``
    (bool), each ``(T, B*N)``.
    """
    for fragment in fragments:
        check_fragment(fragment, need_log_probs=True)
    lengths = {f.obs.shape[0] for f in fragments}
    if len(lengths) != 1:
        raise ValueError(f"the fragments have different lengths T={sorted(lengths)}. Fix: "
                         f"give every actor the same unroll_length.")
    names = ("obs", "actions", "rewards", "terminations", "truncations", "next_obs",
             "log_probs", "resets")
    return {n: torch.as_tensor(np.concatenate([getattr(f, n) for f in fragments], axis=1)
                               ).to(device) for n in names}


@torch.no_grad()
def next_state_values(net: ActorCritic, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(T, M)`` ``V(next_obs)`` where a return needs it: after the last row (the bootstrap
    value) and where a time limit truncated the episode (its real final observation); 0
    elsewhere, where the next row's value serves."""
    next_values = torch.zeros(batch["rewards"].shape, device=batch["rewards"].device)
    rows = batch["truncations"] > 0
    rows[-1] = True
    next_values[rows] = net.critic(batch["next_obs"][rows]).squeeze(-1)
    return next_values


def impala_loss(net: ActorCritic, batch: dict[str, torch.Tensor], config: IMPALAConfig
                ) -> tuple[torch.Tensor, dict[str, float]]:
    """Policy-gradient, value and entropy losses on a time-major batch.

    ``loss = -mean(A_s * log pi(a_s|x_s)) + value_coef * 0.5 * mean((v_s - V(x_s))^2)
    - entropy_coef * mean(H(pi(.|x_s)))``, with ``v_s``, ``A_s`` from V-trace (or plain n-step
    returns when ``config.use_vtrace`` is false). Targets carry no gradient. The targets run
    over the whole grid; the means take only real steps (reset rows are masked out).

    Args:
        net: The learner's network.
        batch: From :func:`stack_fragments`: ``obs``/``next_obs`` ``(T, M, *obs_shape)``, the
            rest ``(T, M)``.
        config: Discount, coefficients, ``rho_bar``/``c_bar``.

    Returns:
        The scalar loss and a dict of float metrics.
    """
    T, M = batch["actions"].shape
    logits, values = net(batch["obs"].flatten(0, 1))
    log_probs_all = F.log_softmax(logits, dim=-1)
    target_log_probs = log_probs_all.gather(1, batch["actions"].reshape(-1, 1)).reshape(T, M)
    values = values.reshape(T, M)
    next_values = next_state_values(net, batch)
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


class IMPALAReport(NamedTuple):
    """What one IMPALA update reports: the means over its SGD steps."""

    loss: float
    pg_loss: float
    value_loss: float
    entropy: float
    mean_ratio: float  # pi / mu of the taken actions: how far the data's policy lags
    clipped_fraction: float  # the share of those ratios above rho_bar (V-trace's clip)


class VTraceLearner(ActorCriticState):
    """Owns the network and its optimiser; one :meth:`update` per batch of ``B`` fragments
    (``config.minibatches`` SGD steps).

    ``updates`` is also the policy *version*: the weights after ``k`` updates are version ``k``.
    On a GPU (``device="cuda"``) the batch is copied there once per update, frames as uint8.
    """

    def __init__(self, obs_dim: int | ObsSpec, n_actions: int, config: IMPALAConfig,
                 device: str | torch.device = "cpu") -> None:
        torch.manual_seed(config.seed)
        self.config, self.device = config, torch.device(device)
        self.net = ActorCritic(obs_dim, n_actions, config.hidden,
                               config.shared_encoder).to(self.device)
        self.optimizer = make_adam(self.net.parameters(), config.learning_rate)
        self.updates = 0
        self.sync_gradients: GradientSync = no_sync  # average_gradients in a group

    def update(self, fragments: Sequence[Fragment]) -> IMPALAReport:
        """One update on ``B`` fragments: ``config.minibatches`` gradient steps, each on an
        interleaved share of the batch's env columns (whole trajectories, as V-trace needs:
        columns ``j``, ``j + k``, ``j + 2k``, ... for step ``j`` of ``k``, spread over the
        fragments).
        From the second step on the network has moved since the targets' data was acted, and
        V-trace's ratios account for it as for any lag. Returns the steps' mean report."""
        batch = stack_fragments(fragments, self.device)
        steps = self.config.minibatches
        if batch["actions"].shape[1] < steps:
            raise ValueError(f"an update of {batch['actions'].shape[1]} env columns cannot be "
                             f"split into minibatches={steps} SGD steps. Fix: raise "
                             f"minibatch_envs, or give each learner more fragments.")
        totals: dict[str, float] = {}
        for j in range(steps):
            part = {name: value[:, j::steps] for name, value in batch.items()}
            loss, metrics = impala_loss(self.net, part, self.config)
            if not math.isfinite(metrics["loss"]):
                raise FloatingPointError(f"IMPALA loss became non-finite at update "
                                         f"{self.updates} (SGD step {j}): {metrics}. Fix: lower "
                                         f"learning_rate or max_grad_norm.")
            gradient_step(self.optimizer, loss, self.net.parameters(), self.sync_gradients,
                          self.config.max_grad_norm)
            for name, value in metrics.items():
                totals[name] = totals.get(name, 0.0) + value / steps
        self.updates += 1
        return IMPALAReport(**totals)
