"""The Ape-X driver: workers feed sharded prioritized replay, a learner samples it.

The loop (:meth:`ApexRun.train`): every worker collects a fragment and adds it, with its own
priorities, to its shard; the driver only reads the worker's small report. Whenever the
learner is idle and updates are owed (the same rate limiter as notebook 02: ``updates_due`` of
the env steps), it asks the learner for up to ``updates_per_call`` of them. A worker whose next
fragment would run more than two learner calls ahead of the learner waits ("parked"), so the
update-to-data ratio holds on any machine. Every ``eval_every`` env steps the evaluator scores
the weights of the latest learner report; a run that ends unsolved ends with one more evaluation,
of its last weights. Asynchronous runs are not bit-reproducible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlkit.algos.apex import ApexAlgorithm
from rlkit.common import eval_seed, next_multiple, updates_due
from rlkit.distributed.apex_roles import ApexLearner, ApexWorker, RayShards, ReplayShard
from rlkit.distributed.cluster import plan_resources, require_ray
from rlkit.distributed.parameter_server import ParameterServer, RayChannel
from rlkit.distributed.roles import Evaluator
from rlkit.distributed.supervisor import STARTUP_TIMEOUT_S, Supervisor
from rlkit.envs import make_env, space_dims
from rlkit.metrics import History
from rlkit.progress import ProgressBar
from rlkit.types import Weights

#: Log-spaced bins of the stored priorities ``(|delta| + eps) ** alpha`` for the histograms.
PRIORITY_BINS = np.logspace(-2, 1.5, 36)


@dataclass
class ApexResult:
    """What :func:`train_apex_ray` returns."""

    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float  # from the end of set-up
    updates: int
    startup_seconds: float
    restarts: int
    weights: Weights  # the online network that solved; unsolved: of the last learner report
    priority_histograms: list[tuple[int, np.ndarray]] = field(default_factory=list)
    shard_sizes: list[int] = field(default_factory=list)
    parked_seconds: float = 0.0  # worker time spent waiting for the learner (rate limiter)
    solved_at_steps: int | None = None  # env steps of the evaluation that solved it
    solved_at_seconds: float | None = None


def train_apex_ray(algo: ApexAlgorithm, progress: bool = False,
                   kill_worker_at: int | None = None, max_restarts: int = 3) -> ApexResult:
    """Train ``algo`` (``ApexDQN`` or ``ApexDDPG``) with Ape-X on the running Ray cluster.

    Stops at the first evaluation reaching ``config.target_return`` or after
    ``config.total_steps`` env steps. Call :func:`rlkit.distributed.cluster.init_ray` first.

    Args:
        algo: The algorithm with its config and its :class:`~rlkit.algos.apex.ApexConfig`.
        progress: Show a progress bar.
        kill_worker_at: Kill worker 0 once this many env steps were collected (a fault demo:
            the driver replaces it with a fresh seed).
        max_restarts: Restarts allowed per worker and for the evaluator.

    Raises:
        ValueError: if the cluster cannot hold the workers and shards (more shards than
            CPUs, say), before any actor starts.
    """
    run = ApexRun(algo, progress, max_restarts)
    with run.sup:
        run.start_roles()
        if kill_worker_at is not None:
            run.sup.kill_at["worker 0"] = kill_worker_at
        run.train()
    return run.result()


class ApexRun:
    """One Ape-X run's actors and bookkeeping; :meth:`train` is the loop."""

    def __init__(self, algo: ApexAlgorithm, progress: bool, max_restarts: int) -> None:
        self.algo, self.cfg, self.apex = algo, algo.config, algo.apex
        cluster_cpus = require_ray()["CPU"]
        if self.apex.num_shards > cluster_cpus:
            raise ValueError(f"num_shards={self.apex.num_shards} is more than the cluster's "
                             f"{cluster_cpus:g} CPUs. Fix: use num_shards <= {int(cluster_cpus)}.")
        # the learner gets 1 CPU; workers and shards share the rest (0.25 each on 2 CPUs)
        self.plan = plan_resources(self.apex.num_workers + self.apex.num_shards, cluster_cpus, 0)
        self.history = History()
        self.sup = Supervisor(self.apex.timeout_s, max_restarts, self.history)
        self.bar = ProgressBar(progress, self.cfg.total_steps, 0, algo.name)
        self.env_steps = self.asked = self.updates = 0
        self.eval_return, self.solved = float("nan"), False
        self.solved_at: tuple[int, float] | tuple[None, None] = (None, None)
        self.weights: Weights = {}
        self.weights_steps = 0  # env steps collected when the learner sent ``weights``
        self.histograms: list[tuple[int, np.ndarray]] = []
        self.parked: dict[int, float] = {}  # worker -> when it started waiting
        self.parked_seconds = 0.0
        self.setup_start = time.perf_counter()

    def start_roles(self) -> None:
        """Parameter server, shards, learner, workers, evaluator; wait until all answer."""
        import ray

        algo, apex, sup = self.algo, self.apex, self.sup
        env = make_env(self.cfg.env_id, self.cfg.seed, algo.action_kind, algo.name)
        obs_dim, act_dim = space_dims(env)[0], algo.replay_action_dim(env)
        server = sup.start("parameter server", lambda r: ray.remote(ParameterServer).options(
            num_cpus=0).remote())
        capacity = max(self.cfg.batch_size, self.cfg.buffer_size // apex.num_shards)
        for k in range(apex.num_shards):
            sup.start(f"shard {k}", lambda r, k=k: ray.remote(ReplayShard).options(
                num_cpus=self.plan.worker_cpus).remote(capacity, obs_dim, act_dim, apex.alpha,
                                                       self.cfg.seed + 10 + k))
        handles = [sup[f"shard {k}"] for k in range(apex.num_shards)]
        shards = RayShards(handles, apex.timeout_s)
        channel = RayChannel(server, apex.timeout_s)
        sup.start("learner", lambda r: ray.remote(ApexLearner).options(
            num_cpus=self.plan.learner_cpus).remote(algo, channel, shards))
        for i in range(apex.num_workers):
            sup.start(f"worker {i}", lambda r, i=i: ray.remote(ApexWorker).options(
                num_cpus=self.plan.worker_cpus).remote(algo, i, channel, shards, r))
        sup.start("evaluator", lambda r: ray.remote(Evaluator).options(num_cpus=0).remote(algo))
        env.close()
        sup.wait_started([r for r in sup.handles if r != "parameter server"],
                         max(STARTUP_TIMEOUT_S, apex.timeout_s))
        sup.get(sup["learner"].publish.remote(), "learner", "publishing its first weights")
        self.startup = time.perf_counter() - self.setup_start

    def train(self) -> None:
        """Collect, train at the rate limiter's pace, evaluate; until solved or out of budget."""
        self.start = time.perf_counter()
        self.collects = {self.collect(i): i for i in range(self.apex.num_workers)}
        self.learner_ref: Any = None
        self.eval_ref: Any = None
        while not self.solved and self.env_steps < self.cfg.total_steps:
            pending = [*self.collects, *(r for r in (self.learner_ref, self.eval_ref) if r)]
            ref = self.sup.wait_one(pending, lambda: ("worker or learner", "training"))
            if ref in self.collects:
                self.on_fragment(ref, self.collects.pop(ref))
            elif ref is self.learner_ref:
                self.on_learner_report(ref)
            else:
                self.on_evaluation(ref)
            self.schedule()
            self.bar.update(self.env_steps, eval=f"{self.eval_return:.0f}")
        self.final_evaluation()
        self.wall = time.perf_counter() - self.start
        self.bar.close(self.solved)
        self.shard_sizes = [s[2] for s in self.sup.get(
            [self.sup[f"shard {k}"].stats.remote() for k in range(self.apex.num_shards)],
            "shards", "reading their sizes")]

    def final_evaluation(self) -> None:
        """Finish the evaluation in flight; if the budget ran out unsolved, evaluate the last
        weights too, so every run ends with an evaluation of what it trained."""
        if self.eval_ref is not None:
            self.on_evaluation(self.eval_ref)
        last = self.history.eval_steps[-1] if self.history.eval_steps else -1
        if not self.solved and self.weights and last < self.weights_steps:
            self.launch_evaluation()
            self.on_evaluation(self.eval_ref)

    def launch_evaluation(self) -> None:
        """Evaluate the weights of the latest learner report, logged at the env steps they had
        trained on; the priority histogram is taken at the same moment."""
        cfg, evals = self.cfg, len(self.history.eval_steps)
        self.eval_at = (self.weights_steps, time.perf_counter() - self.start)
        self.evaluated_weights = self.weights
        self.eval_ref = self.sup["evaluator"].evaluate.remote(
            self.weights, cfg.eval_episodes, eval_seed(cfg.seed, evals, cfg.eval_episodes))
        self.histograms.append((self.env_steps, self.priority_histogram()))

    def collect(self, i: int) -> Any:
        return self.sup[f"worker {i}"].collect.remote(self.apex.fragment_steps)

    def on_fragment(self, ref: Any, i: int) -> None:
        try:
            stats = self.sup.get(ref, f"worker {i}", "collecting a fragment")
        except Exception as error:  # noqa: BLE001  (any failure: replace the worker)
            self.sup.restart(f"worker {i}", error, self.env_steps)
            self.collects[self.collect(i)] = i
            return
        self.env_steps += stats["env_steps"]
        now = time.perf_counter() - self.start
        for ret in stats["episode_returns"]:
            self.history.log_episode(self.env_steps, now, ret)
        self.sup.inject_faults(self.env_steps)
        self.parked[i] = time.perf_counter()

    def on_learner_report(self, ref: Any) -> None:
        report = self.sup.get(ref, "learner", "training")
        self.learner_ref = None
        self.updates = report["updates"]
        self.weights, self.weights_steps = report["weights"], self.env_steps
        self.history.log_loss(self.env_steps, report["loss"])

    def on_evaluation(self, ref: Any) -> None:
        self.eval_ref = None
        try:
            returns = self.sup.get(ref, "evaluator", "evaluating")
        except Exception as error:  # noqa: BLE001
            self.sup.restart("evaluator", error, self.env_steps)
            return
        steps, seconds = self.eval_at
        mean = float(np.mean(returns))
        self.history.log_eval(steps, seconds, mean, float(np.std(returns)))
        self.eval_return = mean
        self.solved = self.cfg.target_return is not None and mean >= self.cfg.target_return
        if self.solved:  # the result keeps the weights that solved, not later ones
            self.solved_at, self.weights = (steps, seconds), self.evaluated_weights

    def schedule(self) -> None:
        """Ask the learner for owed updates, unpark workers it has caught up with, and start
        an evaluation when one is due."""
        cfg, apex = self.cfg, self.apex
        owed = updates_due(self.env_steps, cfg.learning_starts, cfg.train_every) - self.asked
        if self.learner_ref is None and owed > 0:
            n = min(owed, apex.updates_per_call)
            self.learner_ref = self.sup["learner"].train.remote(
                n, self.env_steps / cfg.total_steps)
            self.asked += n
            owed -= n
        if owed <= 2 * apex.updates_per_call:
            for i, since in list(self.parked.items()):
                self.parked_seconds += time.perf_counter() - since
                del self.parked[i]
                self.collects[self.collect(i)] = i
        due = next_multiple(self.history.eval_steps[-1] if self.history.eval_steps else 0,
                            cfg.eval_every)
        if self.eval_ref is None and self.weights and self.weights_steps >= due:
            self.launch_evaluation()

    def priority_histogram(self) -> np.ndarray:
        """Counts of all shards' stored priorities in :data:`PRIORITY_BINS`."""
        refs = [self.sup[f"shard {k}"].histogram.remote(PRIORITY_BINS)
                for k in range(self.apex.num_shards)]
        return np.sum(self.sup.get(refs, "shards", "counting priorities"), axis=0)

    def result(self) -> ApexResult:
        return ApexResult(self.history, self.solved, self.eval_return, self.env_steps,
                          self.wall, self.updates, self.startup,
                          self.sup.restart_count("worker"), self.weights, self.histograms,
                          self.shard_sizes, self.parked_seconds, *self.solved_at)
