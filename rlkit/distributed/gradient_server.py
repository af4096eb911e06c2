"""A2C and A3C through a gradient server: workers compute gradients, one server applies them.

The roles (:mod:`rlkit.distributed.gradient_roles`) are plain classes (tests and
:func:`train_a2c` use them in one process); ``ray.remote(Cls)`` makes them actors. Gradients
travel as one flat float32 array; weights as a ``{name: array}`` dict with a version number.
The server counts each gradient's *staleness*: updates applied between the version a worker
computed on and the moment its gradient lands.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rlkit.algos.a2c import A2CConfig, ActorCritic
from rlkit.common import eval_seed, next_multiple
from rlkit.distributed.cluster import plan_resources, require_ray
from rlkit.distributed.gradient_roles import GradientMessage, GradientServer, GradientWorker
from rlkit.envs import make_env, space_dims
from rlkit.evaluation import evaluate_policy
from rlkit.metrics import History
from rlkit.networks import load_numpy_weights
from rlkit.types import Weights


@dataclass
class GradientRun:
    """What a run returns. ``updates_per_second`` counts applied updates over ``wall_seconds``
    (from the end of start-up to the end of training); ``staleness`` has one entry per
    gradient that reached the server."""

    history: History
    eval_return: float
    solved: bool
    env_steps: int
    wall_seconds: float
    updates: int
    updates_per_second: float
    staleness: list[int] = field(default_factory=list)
    staleness_senders: list[int] = field(default_factory=list)  # worker of each entry above
    skipped_updates: int = 0
    gradients_by_worker: dict[int, int] = field(default_factory=dict)
    worker_restarts: int = 0
    startup_seconds: float = 0.0
    weights: Weights = field(default_factory=dict)


class Tracker:
    """The driver's bookkeeping: env steps, episodes, losses, evaluations and when to stop."""

    def __init__(self, config: A2CConfig, max_steps: int | None = None,
                 evaluate: bool = True) -> None:
        self.config, self.evaluate_on = config, evaluate
        self.max_steps = config.total_steps if max_steps is None else max_steps
        self.history, self.env_steps, self.solved = History(), 0, False
        self.next_eval, self.start = config.eval_every, time.perf_counter()
        self.net: ActorCritic | None = None
        self.by_worker: dict[int, int] = {}

    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def record(self, message: GradientMessage) -> None:
        self.env_steps += message.env_steps
        self.by_worker[message.worker_index] = self.by_worker.get(message.worker_index, 0) + 1
        for ret in message.episode_returns:
            self.history.log_episode(self.env_steps, self.seconds(), ret)
        self.history.log_loss(self.env_steps, message.loss)

    def eval_due(self) -> bool:
        return self.evaluate_on and (self.env_steps >= self.next_eval or self.done)

    def evaluate(self, weights: Weights) -> float:
        """Greedy returns on ``eval_episodes`` fresh episodes of ``config.env_id``."""
        cfg = self.config
        if self.net is None:
            env = make_env(cfg.env_id, cfg.seed)
            self.net = ActorCritic(*space_dims(env), cfg.hidden)
            env.close()
        load_numpy_weights(self.net, weights)
        index = len(self.history.eval_steps)
        returns = evaluate_policy(self.net.greedy_actions, cfg.env_id, cfg.eval_episodes,
                                  eval_seed(cfg.seed, index, cfg.eval_episodes))
        self.history.log_eval(self.env_steps, self.seconds(), returns.mean(), returns.std())
        self.next_eval = next_multiple(self.env_steps, cfg.eval_every)
        target = cfg.target_return
        self.solved = self.solved or (target is not None and bool(returns.mean() >= target))
        return float(returns.mean())

    @property
    def done(self) -> bool:
        return self.solved or self.env_steps >= self.max_steps

    def result(self, stats: dict[str, Any], weights: Weights, **extra: Any) -> GradientRun:
        wall = self.seconds()
        evals = self.history.eval_returns
        return GradientRun(self.history, evals[-1] if evals else float("nan"), self.solved,
                           self.env_steps, wall, stats["updates"], stats["updates"] / wall,
                           stats["staleness"], stats["senders"], stats["skipped"],
                           dict(sorted(self.by_worker.items())), weights=weights, **extra)


def train_a2c(config: A2CConfig, max_steps: int | None = None, evaluate: bool = True
              ) -> GradientRun:
    """Single-process A2C: one :class:`GradientWorker` and the :class:`GradientServer` called
    directly, one update per fragment. Reproducible; the reference for the Ray drivers."""
    server, worker = GradientServer(config), GradientWorker(config, 0)
    tracker = Tracker(config, max_steps, evaluate)
    weights = server.weights()
    while not tracker.done:
        message = worker.compute_gradient(weights)
        weights = server.apply_mean(message)
        tracker.record(message)
        if tracker.eval_due():
            tracker.evaluate(weights.weights)
    return tracker.result(server.stats(), weights.weights)


class Actors:
    """The server and worker actors of one run, sized by :func:`plan_resources` to fit the
    cluster; :meth:`replace` restarts a failed worker, :meth:`kill` ends them all."""

    def __init__(self, config: A2CConfig, num_workers: int, env_ids: list[str | None] | None,
                 timeout_s: float, max_restarts: int) -> None:
        import ray

        self.env_ids = env_ids or [None] * num_workers
        if len(self.env_ids) != num_workers:
            raise ValueError(f"worker_env_ids has {len(self.env_ids)} entries for "
                             f"{num_workers} workers. Fix: give one id (or None) per worker.")
        plan = plan_resources(num_workers, require_ray().get("CPU", 1.0))
        self.config, self.timeout_s, self.max_restarts = config, timeout_s, max_restarts
        self.worker_cls = ray.remote(GradientWorker).options(num_cpus=plan.worker_cpus)
        self.server = ray.remote(GradientServer).options(num_cpus=plan.learner_cpus
                                                         ).remote(config)
        self.workers: list[Any] = []
        self.restarts = 0
        self.restarts_by_worker = [0] * num_workers
        try:
            self.workers = [self.worker_cls.remote(config, i, e)
                            for i, e in enumerate(self.env_ids)]
            ray.get([w.ready.remote() for w in self.workers] + [self.server.stats.remote()],
                    timeout=timeout_s)
        except BaseException:
            self.kill()
            raise

    def replace(self, index: int, error: Exception) -> None:
        import ray

        self.restarts += 1
        self.restarts_by_worker[index] += 1
        if self.restarts_by_worker[index] > self.max_restarts:
            raise RuntimeError(
                f"gradient worker {index} failed {self.restarts_by_worker[index]} times; the "
                f"last error: {error!r}. Fix: the same failure keeps coming back: run the "
                f"environment alone (rlkit.envs.make_env) to debug it, or raise "
                f"max_restarts.") from error
        ray.kill(self.workers[index], no_restart=True)
        self.workers[index] = self.worker_cls.remote(self.config, index, self.env_ids[index],
                                                     self.restarts_by_worker[index])

    def kill(self) -> None:
        import ray

        for actor in [*self.workers, self.server]:
            ray.kill(actor, no_restart=True)


def worker_errors() -> tuple[type[Exception], ...]:
    """The exceptions that mean "this worker died or its task crashed": replace it."""
    from ray.exceptions import RayActorError, RayTaskError

    return (RayActorError, RayTaskError)


def train_a3c_ray(config: A2CConfig, num_workers: int = 2,
                  worker_env_ids: list[str | None] | None = None, max_steps: int | None = None,
                  evaluate: bool = True, kill_worker_at: int | None = None,
                  timeout_s: float = 120.0, max_restarts: int = 3) -> GradientRun:
    """A3C: each worker's gradient is applied as soon as it arrives (``ray.wait``), and that
    worker alone gets the new weights and goes on; no worker waits for another.

    Args:
        config: Run settings (``num_envs * n_steps`` env steps per gradient).
        num_workers: Gradient workers.
        worker_env_ids: Optional env id per worker (``None``: ``config.env_id``).
        max_steps: Stop after this many env steps (default ``config.total_steps``).
        evaluate: Run greedy evaluations (and stop when one reaches the target).
        kill_worker_at: Fault injection: kill worker 0 once the run passes this many env steps.
        timeout_s: Limit of every blocking wait; a silent cluster raises ``TimeoutError``.
        max_restarts: Failed workers replaced before the run gives up.
    """
    import ray

    start = time.perf_counter()
    actors = Actors(config, num_workers, worker_env_ids, timeout_s, max_restarts)
    try:
        startup = time.perf_counter() - start
        tracker, errors = Tracker(config, max_steps, evaluate), worker_errors()
        weights = actors.server.weights.remote()
        pending = {w.compute_gradient.remote(weights): i for i, w in enumerate(actors.workers)}
        while not tracker.done:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout_s)
            if not ready:
                raise TimeoutError(f"no gradient arrived within {timeout_s} s")
            i = pending.pop(ready[0])
            try:
                message = ray.get(ready[0], timeout=timeout_s)
            except errors as error:  # the worker died or crashed: replace it, carry on
                actors.replace(i, error)
                tracker.history.events.append(f"worker {i} replaced at step {tracker.env_steps}")
                pending[actors.workers[i].compute_gradient.remote(weights)] = i
                continue
            weights = actors.server.apply.remote(ready[0])  # the ref: no copy via the driver
            tracker.record(message)
            if kill_worker_at is not None and tracker.env_steps >= kill_worker_at:
                ray.kill(actors.workers[0], no_restart=True)
                kill_worker_at = None
            if tracker.eval_due():
                tracker.evaluate(ray.get(weights, timeout=timeout_s).weights)
            pending[actors.workers[i].compute_gradient.remote(weights)] = i
        stats = ray.get(actors.server.stats.remote(), timeout=timeout_s)
        final = ray.get(weights, timeout=timeout_s).weights
        return tracker.result(stats, final, worker_restarts=actors.restarts,
                              startup_seconds=startup)
    finally:
        actors.kill()


def train_a2c_ray(config: A2CConfig, num_workers: int = 2,
                  worker_env_ids: list[str | None] | None = None, max_steps: int | None = None,
                  evaluate: bool = True, kill_worker_at: int | None = None,
                  timeout_s: float = 120.0, max_restarts: int = 3) -> GradientRun:
    """A2C: every round, all workers compute a gradient on the same weights; the server
    averages the round's gradients and applies them once. A round lasts as long as its slowest
    worker. Arguments as :func:`train_a3c_ray`; a worker that fails is replaced and the round
    goes on with the gradients that arrived."""
    import ray

    start = time.perf_counter()
    actors = Actors(config, num_workers, worker_env_ids, timeout_s, max_restarts)
    try:
        startup = time.perf_counter() - start
        tracker, errors = Tracker(config, max_steps, evaluate), worker_errors()
        weights = actors.server.weights.remote()
        while not tracker.done:
            refs = [w.compute_gradient.remote(weights) for w in actors.workers]
            arrived = []
            for i, ref in enumerate(refs):
                try:
                    tracker.record(ray.get(ref, timeout=timeout_s))
                    arrived.append(ref)
                except errors as error:
                    actors.replace(i, error)
                    tracker.history.events.append(f"worker {i} replaced at step "
                                                  f"{tracker.env_steps}")
            if arrived:
                weights = actors.server.apply_mean.remote(*arrived)
            if kill_worker_at is not None and tracker.env_steps >= kill_worker_at:
                ray.kill(actors.workers[0], no_restart=True)
                kill_worker_at = None
            if tracker.eval_due():
                tracker.evaluate(ray.get(weights, timeout=timeout_s).weights)
        stats = ray.get(actors.server.stats.remote(), timeout=timeout_s)
        final = ray.get(weights, timeout=timeout_s).weights
        return tracker.result(stats, final, worker_restarts=actors.restarts,
                              startup_seconds=startup)
    finally:
        actors.kill()
