"""IMPALA in one process, with a *simulated* policy lag: reproducible, and the reference the Ray
version (:func:`rlkit.distributed.impala.driver.train_impala_ray`) is checked against.

Each update collects ``batch_fragments`` trajectories, round-robin from ``num_workers`` runners
(seeded as the Ray actors are), acting with the weights of ``policy_lag`` updates ago, then
takes one update (``config.minibatches`` V-trace SGD steps). ``policy_lag=0`` is synchronous,
on-policy training. Given a :class:`~rlkit.algos.ppo.PPOConfig` the same loop trains PPO
(``policy_lag=0``, :func:`rlkit.train.ppo.train_ppo`) or APPO with a simulated lag. Its
checkpoints resume bit-identically, as the off-policy loop's do.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlkit.algos.actor_critic import greedy_eval
from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.policy_heads import acting_policy, make_actor_critic
from rlkit.core.common import evaluation_due, worker_seed
from rlkit.core.metrics import History, RunResult
from rlkit.core.networks import load_numpy_weights
from rlkit.core.validation import FLAG, check_value, fail, int_rule, require_instance
from rlkit.envs.runner import EnvRunner
from rlkit.envs.snapshot import saved_runners
from rlkit.notebook.progress import ProgressBar
from rlkit.train.checkpoint import (EXACT_RESUME, Checkpoint, Checkpointer,
                                    check_checkpoint_options, load_checkpoint,
                                    resume_with_new_episodes)
from rlkit.train.learner_state import LearnerState, load_learner_state
from rlkit.train.interrupts import interrupts_deferred, save_on_interrupt
from rlkit.train.options import refuse_other_options


@dataclass(kw_only=True)
class IMPALAResult(RunResult):
    """What an IMPALA run returns (single process or Ray): :class:`RunResult` plus IMPALA's own
    measures. ``env_steps`` counts the env steps of the fragments the learner consumed.

    Attributes:
        policy_lags: Per consumed fragment, the learner's version minus the acting version.
        queue_high_water: Most fragments the queue ever held (Ray only).
        actor_wait_seconds: Seconds the actors spent blocked on a full queue (Ray only).
        learner_busy_seconds: Seconds the learner spent updating and publishing (Ray only).
        learner_wait_seconds: Seconds the learner spent waiting for batches (Ray only).
        eval_seconds: Seconds the driver spent in greedy evaluations (Ray only).
        diagnostics: Per update, each metric the learner returned besides the loss (PPO's
            ``approx_kl`` and ``clip_fraction`` among them; a learner group's averaged over its
            ranks; on Ray, the updates of this run, not restored by a resume).
        checkpoint: The last checkpoint written, or ``None``.
        device: Where the learner ran, e.g. ``"cpu"`` or ``"cuda: NVIDIA H100 ..."``.
    """

    policy_lags: list[int] = field(default_factory=list)
    queue_high_water: int = 0
    actor_wait_seconds: float = 0.0
    learner_busy_seconds: float = 0.0
    learner_wait_seconds: float = 0.0
    eval_seconds: float = 0.0
    diagnostics: dict[str, list[float]] = field(default_factory=dict)
    checkpoint: Path | None = None
    device: str = "cpu"

    @property
    def mean_policy_lag(self) -> float:
        """Mean of :attr:`policy_lags` (0.0 for a run that consumed nothing)."""
        return float(np.mean(self.policy_lags)) if self.policy_lags else 0.0

    @property
    def max_policy_lag(self) -> int:
        """Largest of :attr:`policy_lags`."""
        return max(self.policy_lags, default=0)

    @property
    def env_steps_per_second(self) -> float:
        """Env steps the learner consumed per wall-clock second of training."""
        return self.env_steps / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def consumption_steps_per_second(self) -> float:
        """Env steps consumed per second of training with the driver's evaluation seconds
        taken out: the learner's throughput. Exact for a run whose only evaluation is the final
        one, at the end of the budget (nothing consumed while it runs is counted); mid-run
        evaluations overlap training, so there it reads high."""
        seconds = self.wall_seconds - self.eval_seconds
        return self.env_steps / seconds if seconds > 0 else 0.0

    def pace(self, num_workers: int) -> Pace:
        """Which side set this Ray run's pace, read from its own clocks (:class:`Pace`);
        ``num_workers``: the run's workers (the queue sums their waits)."""
        check_value("num_workers", num_workers, int_rule(1, example=2))
        wall = self.wall_seconds if self.wall_seconds > 0 else float("inf")
        return Pace(learner_busy=self.learner_busy_seconds / wall,
                    learner_waiting=self.learner_wait_seconds / wall,
                    actors_waiting=self.actor_wait_seconds / num_workers / wall)


#: Below this share of the run, a side's waiting is read as none (:attr:`Pace.limit`).
PACE_WAIT_FLOOR = 0.05


@dataclass(frozen=True)
class Pace:
    """Which side of an actor-learner run set its pace, from the run's own clocks. Each side
    waits for the other: the learner for a batch when the actors are slower, an actor for room
    in the queue when the learner is slower. The side that waited less set the pace. It says
    what happened on this machine in this run (its cores, its load, Ray's nice 15 for actors):
    a notebook prints it and never asserts it.

    Attributes:
        learner_busy: Share of the run the learner spent updating and publishing.
        learner_waiting: Share of the run the learner waited for a batch.
        actors_waiting: Share of the run the mean actor waited for room in the full queue.
    """

    learner_busy: float
    learner_waiting: float
    actors_waiting: float

    @property
    def limit(self) -> str:
        """``"learner"``, ``"actors"``, or ``"neither"`` when neither side waited for
        :data:`PACE_WAIT_FLOOR` of the run or more (the two kept pace with each other)."""
        if max(self.learner_waiting, self.actors_waiting) < PACE_WAIT_FLOOR:
            return "neither"
        return "learner" if self.actors_waiting > self.learner_waiting else "actors"

    def __str__(self) -> str:
        waits = (f"learner busy {self.learner_busy:.0%}, waiting for a batch "
                 f"{self.learner_waiting:.0%}; an actor waiting for room in the queue "
                 f"{self.actors_waiting:.0%}")
        verdict = {"learner": "the learner set the pace (the actors waited for it)",
                   "actors": "the actors set the pace (the learner waited for frames)",
                   "neither": "neither side waited: they kept pace"}[self.limit]
        return f"{waits}: {verdict}"


#: What :func:`train_impala` and :func:`rlkit.train.ppo.train_ppo` take besides the config,
#: ``policy_lag`` and ``progress`` (no replay buffer to leave out).
ON_POLICY_CHECKPOINT_OPTIONS = ("checkpoint_dir", "checkpoint_every", "resume_from")

#: Updates (batches) between one-process checkpoints when ``checkpoint_every`` is not given.
CHECKPOINT_EVERY = 50


def train_impala(config: IMPALAConfig, *, policy_lag: int = 0, progress: bool = False,
                 checkpoint_dir: str | Path | None = None, checkpoint_every: int | None = None,
                 resume_from: str | Path | None = None, **options: Any) -> IMPALAResult:
    """Train IMPALA (or PPO, APPO: see :func:`make_learner`) in this process;
    bit-reproducible for a given config and ``policy_lag``.

    Args:
        config: The run's settings (``num_workers`` runners, each ``envs_per_worker`` envs).
        policy_lag: Act with the weights of this many updates ago (0: on-policy).
        progress: Show a progress bar.
        checkpoint_dir: Where to keep ``checkpoint.pt``: written every ``checkpoint_every``
            updates, at the end and on Ctrl-C (taken at the end of the batch in progress). It
            holds the learner and the run state (the runners' envs mid-episode, the random
            streams, the weights the lag still acts with), so a resume from it is
            bit-identical to the run never stopped (see :mod:`rlkit.train.checkpoint`).
        checkpoint_every: Updates (batches) between checkpoints; ``None``: every
            ``CHECKPOINT_EVERY`` (50). Given without ``checkpoint_dir``, it is refused.
        resume_from: A checkpoint (file or folder) to continue from, of the same algorithm.
        **options: None are taken: a Ray driver's run option (``num_learners``, ...) is
            refused, naming :func:`train_impala_ray`.
    """
    require_instance("train_impala", "config", config, IMPALAConfig, "train_impala(IMPALAConfig())")
    refuse_other_options("train_impala", options,
                         ("policy_lag", "progress", *ON_POLICY_CHECKPOINT_OPTIONS),
                         "train_impala_ray(config, ...)")
    check_value("policy_lag", policy_lag, int_rule(0, example=4))
    check_value("progress", progress, FLAG)
    check_checkpoint_options(checkpoint_dir, checkpoint_every, resume_from)
    name, kind = config.algorithm, config.action_kind
    resumed = None if resume_from is None else load_checkpoint(resume_from, name, config)
    torch.set_num_threads(1)
    runners = [EnvRunner(config.env_id, worker_seed(config.seed, i), kind, name,
                         config.envs_per_worker, config.images)
               for i in range(config.num_workers)]
    obs_dim, n_actions = runners[0].obs_spec, runners[0].action_dim
    learner = config.make_learner(obs_dim, n_actions)
    acting = make_actor_critic(obs_dim, n_actions, config.hidden, kind, config.shared_encoder)
    rng = np.random.default_rng(config.seed)
    policy = acting_policy(acting, rng)
    run = _OnPolicyRun(History(), collections.deque([learner.get_weights()],
                                                     maxlen=policy_lag + 1))
    if resumed is not None:
        run.resume(resumed, learner, runners, rng)
    checkpointer = Checkpointer(checkpoint_dir, checkpoint_every or CHECKPOINT_EVERY, False, name,
                                config, run.saved_at)
    bar = ProgressBar(progress, config.total_steps, run.env_steps, f"{name} (1 process)")
    start = time.perf_counter()

    def save(periodic: bool = False) -> Path | None:
        base = learner.updates if periodic else checkpointer.saved_at_updates
        return checkpointer.save(lambda _: LearnerState(learner.state_dict(), None),
                                 run.env_steps, run.clock_offset + time.perf_counter() - start,
                                 run.history, lambda: run.state(runners, rng, base))

    try:
        with save_on_interrupt(save, lambda: run.env_steps):
            while run.env_steps < config.total_steps and not run.solved:
                with interrupts_deferred():  # checkpoints fall between batches, never inside
                    run.step(config, learner, runners, (acting, policy), policy_lag,
                             lambda: run.clock_offset + time.perf_counter() - start)
                    if checkpointer.due(learner.updates):
                        save(periodic=True)
                    bar.update(run.env_steps, eval=f"{run.eval_return:.0f}")
            save()
    finally:
        bar.close(run.solved)
        for runner in runners:
            runner.close()
    return IMPALAResult(history=run.history, solved=run.solved, eval_return=run.eval_return,
                        env_steps=run.env_steps,
                        wall_seconds=run.clock_offset + time.perf_counter() - start,
                        updates=learner.updates, weights=learner.get_weights(),
                        policy_lags=run.lags, diagnostics=run.diagnostics,
                        checkpoint=checkpointer.last)


@dataclass
class _OnPolicyRun:
    """The one-process on-policy loop's state besides the learner, the runners and the acting
    stream: what one :meth:`step` advances and a checkpoint's run state holds."""

    history: History
    past: collections.deque  # the weights of the last policy_lag + 1 versions, oldest first
    lags: list[int] = field(default_factory=list)
    diagnostics: dict[str, list[float]] = field(default_factory=dict)
    env_steps: int = 0
    evals: int = 0
    eval_return: float = math.nan
    solved: bool = False
    clock_offset: float = 0.0
    saved_at: int = 0

    def step(self, config: IMPALAConfig, learner: Any, runners: list[EnvRunner],
             acting: tuple[Any, Any], policy_lag: int, clock: Callable[[], float]) -> None:
        """One batch: ``batch_fragments`` fragments round-robin from the runners, acted (by
        ``acting``'s network and sampling policy) with the weights of ``policy_lag`` updates
        ago; one update; an evaluation when due."""
        net, policy = acting
        load_numpy_weights(net, self.past[0])  # the oldest kept: policy_lag updates ago
        version = max(0, learner.updates - policy_lag)
        batch = []
        for k in range(config.batch_fragments):
            runner = runners[(learner.updates * config.batch_fragments + k) % len(runners)]
            traj = runner.run(config.unroll_length, policy, fixed_length=True)
            traj.policy_version = version
            batch.append(traj)
            self.env_steps += traj.num_steps
            for ret in traj.episode_returns:
                self.history.log_episode(self.env_steps, clock(), ret)
        self.lags += [learner.updates - version] * len(batch)
        report = learner.update(batch)
        self.history.log_loss(self.env_steps, report.loss)
        for key, value in report._asdict().items():
            if key != "loss":
                self.diagnostics.setdefault(key, []).append(value)
        self.past.append(learner.get_weights())
        if evaluation_due(self.env_steps, self.history.eval_steps, config.eval_every,
                          config.total_steps):
            obs_dim, n_actions = runners[0].obs_spec, runners[0].action_dim
            mean, std = greedy_eval(learner.get_weights(), obs_dim, n_actions, config,
                                    self.evals, make_actor_critic(
                                        obs_dim, n_actions, config.hidden, config.action_kind,
                                        config.shared_encoder))
            self.history.log_eval(self.env_steps, clock(), mean, std)
            self.evals, self.eval_return = self.evals + 1, mean
            self.solved = config.target_return is not None and mean >= config.target_return

    def state(self, runners: list[EnvRunner], rng: np.random.Generator, saved_at: int
              ) -> dict[str, Any]:
        """The run state a checkpoint holds (the learner's own state travels beside it)."""
        envs, unsupported = saved_runners(runners)
        return {"runners": envs, "unsupported": unsupported, "rng": rng.bit_generator.state,
                "torch_rng": torch.get_rng_state(), "lags": list(self.lags),
                "diagnostics": {k: list(v) for k, v in self.diagnostics.items()},
                "past": [{k: torch.from_numpy(np.array(v)) for k, v in w.items()}
                         for w in self.past],
                "evals": self.evals, "eval_return": self.eval_return, "saved_at": saved_at}

    def resume(self, resumed: Checkpoint, learner: Any, runners: list[EnvRunner],
               rng: np.random.Generator) -> None:
        """Continue from a checkpoint: bit-identical to the run never stopped when
        :func:`train_impala` wrote it; from a Ray driver's (no run state), with the learner,
        counts and history restored and new episodes."""
        load_learner_state(learner, resumed.learner)
        self.history, self.env_steps = resumed.history, resumed.env_steps
        self.clock_offset, self.saved_at = resumed.wall_seconds, resumed.updates
        self.past.clear()
        self.past.append(learner.get_weights())
        state = resumed.run_state
        why = "the checkpoint holds no run state" if state is None else state["unsupported"]
        if why:
            self.evals = len(self.history.eval_steps)
            self.eval_return = self.history.eval_returns[-1] if self.evals else math.nan
            how = resume_with_new_episodes(resumed, rng, why)
        else:
            if len(state["runners"]) != len(runners):
                fail("num_workers", len(runners), f"differs from the checkpoint's "
                     f"{len(state['runners'])}", "resume with the checkpoint's num_workers")
            for runner, saved in zip(runners, state["runners"]):
                runner.load_state_dict(saved)
            rng.bit_generator.state = state["rng"]
            torch.set_rng_state(state["torch_rng"])
            self.past.clear()
            self.past.extend({k: v.numpy().copy() for k, v in w.items()} for w in state["past"])
            self.lags, self.diagnostics = list(state["lags"]), dict(state["diagnostics"])
            self.evals, self.eval_return = state["evals"], state["eval_return"]
            self.saved_at = state["saved_at"]
            how = EXACT_RESUME
        self.history.events.append(f"step {self.env_steps}: resumed from {resumed.path} ({how})")
