"""The Ape-X driver: workers feed sharded prioritized replay, a learner samples it.

The loop is :class:`rlkit.distributed.runtime.driver.DriverRun`'s, the same as every driver's; Ape-X
fills in its events (:meth:`ApexRun.on_fragment`, ``on_learner_report``, ``on_evaluation``) and what
is due (:meth:`ApexRun.schedule`). Every worker collects a fragment and adds it, with its own
priorities, to its shard; the driver only reads the worker's small report. Whenever the learner is
idle and updates are owed (the same rate limiter as notebook 02: ``updates_due`` of the env steps),
it asks the learner for up to ``updates_per_call`` of them. A worker whose next fragment would run
more than two learner calls ahead of the learner waits ("parked"), so the update-to-data ratio holds
on any machine. Every ``eval_every`` env steps the evaluator scores the weights of the latest
learner report; a run that ends unsolved ends with one more evaluation, of its last weights.
The shards' priorities are counted in a histogram :data:`HISTOGRAMS_PER_EVAL` times per
evaluation interval, so even a run that solves at its first evaluation has several to compare.
Asynchronous runs are not bit-reproducible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlkit.algos.apex import ApexAlgorithm, check_apex_algorithm
from rlkit.core.common import eval_seed, evaluation_due, role_seed
from rlkit.core.metrics import RunResult
from rlkit.core.spaces import obs_spec
from rlkit.core.types import Weights
from rlkit.core.validation import build
from rlkit.distributed.apex.roles import ApexLearner, ApexLearnerReport, ApexWorker
from rlkit.distributed.apex.shards import RayShards, ReplayShard
from rlkit.distributed.runtime.cluster import require_ray
from rlkit.distributed.runtime.driver import DriverRun
from rlkit.distributed.runtime.learner_group import check_group_share
from rlkit.distributed.runtime.options import RunOptions
from rlkit.distributed.runtime.evaluator import Evaluator
from rlkit.distributed.runtime.parameter_server import ParameterServer, RayChannel
from rlkit.distributed.runtime.supervisor import STARTUP_TIMEOUT_S
from rlkit.envs.make import make_env
from rlkit.replay.memory import check_buffer_memory, replay_bytes
from rlkit.train.checkpoint import Checkpoint, updates_owed

#: Log-spaced bins of the stored priorities ``(|delta| + eps) ** alpha`` for the histograms.
PRIORITY_BINS = np.logspace(-2, 1.5, 36)
#: Priority histograms taken per ``eval_every`` env steps (every 625 for an ``eval_every`` of
#: 2,500): no evaluation comes before ``eval_every``, so a run has this many before it can stop.
HISTOGRAMS_PER_EVAL = 4


@dataclass(kw_only=True)
class ApexResult(RunResult):
    """What :func:`train_apex_ray` returns: :class:`RunResult`, plus Ape-X's own measures.

    Attributes:
        priority_histograms: ``(env_steps, counts in PRIORITY_BINS)``, taken each time the
            env steps pass a multiple of ``eval_every / HISTOGRAMS_PER_EVAL``.
        shard_sizes: Items in each shard at the end.
        parked_seconds: Worker time spent waiting for the learner (the rate limiter).
        solved_at_steps, solved_at_seconds: The evaluation that solved it (``None`` if none).
    """

    priority_histograms: list[tuple[int, np.ndarray]] = field(default_factory=list)
    shard_sizes: list[int] = field(default_factory=list)
    parked_seconds: float = 0.0
    solved_at_steps: int | None = None
    solved_at_seconds: float | None = None


def train_apex_ray(algo: ApexAlgorithm, **options: Any) -> ApexResult:
    """Train ``algo`` (any :class:`~rlkit.algos.apex.ApexAlgorithm`: ``ApexDQN``, ``ApexDDPG``
    or your own) with Ape-X on the running Ray cluster.

    Stops at the first evaluation reaching ``config.target_return`` or after
    ``config.total_steps`` env steps. Call :func:`rlkit.distributed.runtime.cluster.init_ray` first.

    Args:
        algo: The algorithm with its config and its :class:`~rlkit.algos.apex.ApexConfig`.
        options: :class:`~rlkit.distributed.runtime.driver.RunOptions` fields (``progress``,
            ``timeout_s``, ``max_restarts``, ``kill_at``, ``checkpoint_dir``,
            ``checkpoint_every`` (default 2000 updates), ``resume_from``); the roles are
            ``"worker i"``, ``"shard k"``, ``"learner"``, ``"evaluator"`` and ``"parameter
            server"``. A checkpoint holds the learner; a resumed run refills the shards
            (``learning_starts`` fresh env steps before its first update). ``num_learners=W``
            runs ``"learner 0"`` ... ``"learner W-1"``, each sampling ``batch_size / W`` of
            every batch from the shards, their gradients averaged; with ``learner_restarts``
            a lost rank restarts the group from the last checkpoint, and the shards keep
            the replay through it.

    Raises:
        ValueError: if the cluster cannot hold the workers and shards (more shards than
            CPUs, say), before any actor starts.
    """
    check_apex_algorithm("train_apex_ray", algo)
    return ApexRun(algo, build(RunOptions, "train_apex_ray", options)).run()


class ApexRun(DriverRun):
    """One Ape-X run's actors and bookkeeping, on the shared :class:`DriverRun` loop."""

    CHECKPOINT_EVERY = 2_000
    LEARNER_GROUPS = LEARNER_RESTARTS = True  # the replay lives in the shards: none is lost

    def __init__(self, algo: ApexAlgorithm, options: RunOptions) -> None:
        super().__init__(options, algo.config.total_steps, algo.name, algo.name, algo.config)
        self.algo, self.cfg, self.apex = algo, algo.config, algo.apex
        check_group_share(options.num_learners, "batch_size", self.cfg.batch_size, "samples")
        cluster_cpus = require_ray()["CPU"]
        if self.apex.num_shards > cluster_cpus:
            raise ValueError(f"num_shards={self.apex.num_shards} is more than the cluster's "
                             f"{cluster_cpus:g} CPUs. Fix: use num_shards <= {int(cluster_cpus)}.")
        env = make_env(self.cfg.env_id, self.cfg.seed, algo.action_kind, algo.name, algo.images)
        algo.make_policy_network(env)  # (an action box the network cannot map is refused here)
        self.obs_dim = obs_spec(env.observation_space)  # a vector's size or an image's form
        self.act_dim = algo.replay_action_dim(env)
        env.close()
        # the learner gets 1 CPU; the shards share its node with any workers there, the
        # workers fill the rest (on one 2-CPU node, 2 workers and 2 shards: 0.25 CPU each)
        self.plan = self.place(self.cfg.num_workers, 0, shards=self.apex.num_shards)
        # every shard's storage and trees, counted on the learner's node (the shards' node)
        # before any shard allocates its own
        k, self.capacity = self.apex.num_shards, max(self.cfg.batch_size,
                                                     self.cfg.buffer_size // self.apex.num_shards)
        free, where = self.learner_free_memory()
        check_buffer_memory(self.cfg.buffer_size, self.obs_dim, self.act_dim, what=f" (in {k} "
                            f"shards, with their priority trees)", nbytes=k * replay_bytes(
                                self.capacity, self.obs_dim, self.act_dim, True),
                            free=free, where=where)
        self.asked = self.updates  # a resumed run's learner has done these already
        self.solved_at: tuple[int, float] | tuple[None, None] = (None, None)
        self.weights: Weights = {}
        self.weights_steps = 0  # env steps collected when the learner sent ``weights``
        self.histograms: list[tuple[int, np.ndarray]] = []
        self.histogram_every = max(1, self.cfg.eval_every // HISTOGRAMS_PER_EVAL)
        self.histogram_mark = self.env_steps // self.histogram_every  # multiples passed so far
        self.parked: dict[int, float] = {}  # worker -> when it started waiting
        self.parked_seconds = 0.0
        self.learner_busy = self.evaluating = False

    def role_names(self) -> list[str]:
        return (["parameter server", *self.learner_roles, "evaluator"]
                + [f"shard {k}" for k in range(self.apex.num_shards)]
                + [f"worker {i}" for i in range(self.cfg.num_workers)])

    def start_roles(self) -> None:
        """Parameter server, shards, learner, workers, evaluator; wait until all answer."""
        import ray

        algo, apex, sup, timeout = self.algo, self.apex, self.supervisor, self.options.timeout_s
        obs_dim, act_dim, capacity = self.obs_dim, self.act_dim, self.capacity
        server = sup.start("parameter server", lambda r: ray.remote(ParameterServer).options(
            **sup.options("parameter server")).remote())
        for k in range(apex.num_shards):
            sup.start(f"shard {k}", lambda r, k=k: ray.remote(ReplayShard).options(
                **sup.options(f"shard {k}")).remote(capacity, obs_dim, act_dim, apex.alpha,
                                                    role_seed(self.cfg.seed, "shard", k, r)))
        shards = RayShards([sup[f"shard {k}"] for k in range(apex.num_shards)], timeout)
        channel = RayChannel(server, timeout)
        world = len(self.learner_roles)  # rank 0 publishes the weights
        for rank, role in enumerate(self.learner_roles):
            sup.start(role, lambda r, rank=rank, role=role: ray.remote(ApexLearner).options(
                **sup.options(role)).remote(algo, None if rank else channel, shards, "cpu",
                                            rank, world, r))
        for i in range(self.cfg.num_workers):
            sup.start(f"worker {i}", lambda r, i=i: ray.remote(ApexWorker).options(
                **sup.options(f"worker {i}")).remote(algo, i, channel, shards, r))
        sup.start("evaluator", lambda r: ray.remote(Evaluator).options(
            **sup.options("evaluator")).remote(algo))
        timeout = max(STARTUP_TIMEOUT_S, timeout)
        sup.wait_started([r for r in sup.handles if r != "parameter server"], timeout)
        self.form_learner_group(timeout)
        self.restore_learner(timeout)
        sup.get(sup[self.LEARNER].publish.remote(), self.LEARNER, "publishing its first weights")

    def train(self) -> None:
        for i in range(self.cfg.num_workers):
            self.collect(i)
        super().train()

    def done(self) -> bool:
        return self.solved or self.env_steps >= self.cfg.total_steps

    def collect(self, i: int) -> None:
        if f"worker {i}" not in self.supervisor.handles:  # dropped: its node is gone
            return
        ref = self.supervisor[f"worker {i}"].collect.remote(self.cfg.fragment_steps)
        self.expect(ref, f"worker {i}", lambda r, i=i: self.on_fragment(r, i))

    # --- events ---------------------------------------------------------------------------

    def on_fragment(self, ref: Any, i: int) -> None:
        """A worker added a fragment to its shard: count it; the worker waits to be unparked."""
        try:
            stats = self.supervisor.get(ref, f"worker {i}", "collecting a fragment")
        except Exception as error:  # noqa: BLE001  (any failure: replace the worker)
            self.restart_role(f"worker {i}", error)
            self.collect(i)
            return
        self.env_steps += stats.env_steps
        now = self.clock()
        for ret in stats.episode_returns:
            self.history.log_episode(self.env_steps, now, ret)
        self.parked[i] = time.perf_counter()

    def on_learner_reports(self, reports: list[ApexLearnerReport]) -> None:
        """Every rank's report of one call (one learner: one report): rank 0's weights."""
        report = reports[0]._replace(loss=float(np.mean([r.loss for r in reports])),
                                     mean_td_error=float(np.mean([r.mean_td_error
                                                                  for r in reports])))
        self.learner_busy = False
        self.updates = report.updates
        self.weights, self.weights_steps = report.weights, self.env_steps
        self.history.log_loss(self.env_steps, report.loss)
        self.maybe_save(self.updates)

    def on_evaluation(self, ref: Any) -> None:
        self.evaluating = False
        try:
            returns = self.supervisor.get(ref, "evaluator", "evaluating")
        except Exception as error:  # noqa: BLE001
            self.supervisor.restart("evaluator", error, self.env_steps)
            return
        steps, seconds = self.eval_at
        self.log_evaluation(steps, seconds, float(np.mean(returns)), float(np.std(returns)),
                            self.cfg.target_return)
        if self.solved:  # the result keeps the weights that solved, not later ones
            self.solved_at, self.weights = (steps, seconds), self.evaluated_weights

    def after_learner_restart(self, saved: Checkpoint) -> None:
        """The group is back at ``saved``: the shards kept the replay, so the rate limiter goes
        on from the checkpoint's update count (the workers wait while the learner catches up)."""
        self.learner_busy, self.asked = False, saved.updates

    # --- what is due ----------------------------------------------------------------------

    def schedule(self) -> None:
        """Ask the learner for owed updates, unpark workers it has caught up with, and start
        an evaluation when one is due."""
        cfg, apex = self.cfg, self.apex
        owed = updates_owed(self.env_steps, cfg, self.resumed) - self.asked
        if not self.learner_busy and owed > 0:
            n = min(owed, apex.updates_per_call)
            self.ask_learners("train", [n, self.env_steps / cfg.total_steps], "training",
                              self.on_learner_reports)
            self.learner_busy, self.asked, owed = True, self.asked + n, owed - n
        if owed <= 2 * apex.updates_per_call:
            for i, since in list(self.parked.items()):
                self.parked_seconds += time.perf_counter() - since
                del self.parked[i]
                self.collect(i)
        if not self.evaluating and self.weights and evaluation_due(
                self.weights_steps, self.history.eval_steps, cfg.eval_every):
            self.launch_evaluation()
        if self.env_steps // self.histogram_every > self.histogram_mark:
            self.histogram_mark = self.env_steps // self.histogram_every
            self.histograms.append((self.env_steps, self.priority_histogram()))

    def launch_evaluation(self) -> None:
        """Evaluate the weights of the latest learner report, logged at the env steps they had
        trained on."""
        cfg, evals = self.cfg, len(self.history.eval_steps)
        self.eval_at = (self.weights_steps, self.clock())
        self.evaluated_weights = self.weights
        ref = self.supervisor["evaluator"].evaluate.remote(
            self.weights, cfg.eval_episodes, eval_seed(cfg.seed, evals, cfg.eval_episodes))
        self.expect(ref, "evaluator", self.on_evaluation)
        self.evaluating = True

    def finish(self) -> None:
        """Finish the evaluation in flight; if the budget ran out unsolved, evaluate the last
        weights too, so every run ends with an evaluation of what it trained."""
        self.drain("evaluator")
        last = self.history.eval_steps[-1] if self.history.eval_steps else -1
        if not self.solved and self.weights and last < self.weights_steps:
            self.launch_evaluation()
            self.drain("evaluator")
        self.wall = self.clock()
        self.shard_sizes = [s.size for s in self.supervisor.get(
            [self.supervisor[f"shard {k}"].stats.remote() for k in range(self.apex.num_shards)],
            "shards", "reading their sizes")]
        self.save()

    def priority_histogram(self) -> np.ndarray:
        """Counts of all shards' stored priorities in :data:`PRIORITY_BINS`."""
        refs = [self.supervisor[f"shard {k}"].histogram.remote(PRIORITY_BINS)
                for k in range(self.apex.num_shards)]
        return np.sum(self.supervisor.get(refs, "shards", "counting priorities"), axis=0)

    def result(self) -> ApexResult:
        return ApexResult(
            history=self.history, solved=self.solved, eval_return=self.eval_return,
            env_steps=self.env_steps, wall_seconds=self.wall, updates=self.updates,
            weights=self.weights, startup_seconds=self.startup_seconds,
            worker_restarts=self.supervisor.restart_count("worker"),
            priority_histograms=self.histograms, shard_sizes=self.shard_sizes,
            parked_seconds=self.parked_seconds, solved_at_steps=self.solved_at[0],
            solved_at_seconds=self.solved_at[1])
