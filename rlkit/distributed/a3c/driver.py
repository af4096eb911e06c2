"""A2C and A3C through a gradient server: workers compute gradients, one server applies them.

The roles (:mod:`rlkit.distributed.a3c.roles`) are plain classes (tests and
:func:`train_a2c` use them in one process); ``ray.remote(Cls)`` makes them actors. Gradients
travel as one flat float32 array; weights as a ``{name: array}`` dict with a version number.
The server counts each gradient's *staleness*: updates applied between the version a worker
computed on and the moment its gradient lands.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from rlkit.algos.a2c import A2CConfig
from rlkit.algos.actor_critic import greedy_eval
from rlkit.core.common import evaluation_due
from rlkit.core.metrics import History, RunResult
from rlkit.core.validation import build, require_instance
from rlkit.distributed.a3c.roles import GradientMessage, GradientServer, GradientWorker
from rlkit.distributed.runtime.driver import DriverRun
from rlkit.distributed.runtime.options import RunOptions
from rlkit.distributed.runtime.supervisor import STARTUP_TIMEOUT_S
from rlkit.envs.make import check_worker_env_ids
from rlkit.train.options import refuse_other_options


@dataclass(kw_only=True)
class A3CResult(RunResult):
    """What the A2C and A3C drivers return: :class:`RunResult`, plus the gradient server's
    counters.

    Attributes:
        updates_per_second: Applied updates per second of ``wall_seconds``.
        staleness: One entry per gradient that reached the server: updates applied between
            the weights version it was computed on and its arrival.
        staleness_senders: The worker of each entry above.
        skipped_updates: Non-finite gradients the server did not apply.
        gradients_by_worker: Gradients received from each worker.
    """

    updates_per_second: float = 0.0
    staleness: list[int] = field(default_factory=list)
    staleness_senders: list[int] = field(default_factory=list)
    skipped_updates: int = 0
    gradients_by_worker: dict[int, int] = field(default_factory=dict)


def train_a2c(config: A2CConfig, **options: Any) -> A3CResult:
    """Single-process A2C: one :class:`GradientWorker` and the :class:`GradientServer` called
    directly, one update per fragment. Reproducible; the reference for the Ray drivers.
    ``options``: none are taken; a Ray driver's run option (``num_learners``, ...) is refused,
    naming :func:`train_a2c_ray`."""
    require_instance("train_a2c", "config", config, A2CConfig, "train_a2c(A2CConfig(...))")
    refuse_other_options("train_a2c", options, (), "train_a2c_ray(config, ...)")
    server, worker = GradientServer(config), GradientWorker(config, 0)
    budget = config.total_steps
    history, env_steps, solved, eval_return = History(), 0, False, math.nan
    weights, start = server.weights(), time.perf_counter()
    while not solved and env_steps < budget:
        message = worker.compute_gradient(weights)
        weights = server.apply_mean(message)
        env_steps += message.env_steps
        for ret in message.episode_returns:
            history.log_episode(env_steps, time.perf_counter() - start, ret)
        history.log_loss(env_steps, message.loss)
        if config.eval_every is not None and evaluation_due(
                env_steps, history.eval_steps, config.eval_every, budget):
            eval_return, std = greedy_eval(weights.weights, worker.runner.obs_dim,
                                           worker.runner.action_dim, config,
                                           len(history.eval_steps))
            history.log_eval(env_steps, time.perf_counter() - start, eval_return, std)
            solved = config.target_return is not None and eval_return >= config.target_return
    wall, stats = time.perf_counter() - start, server.stats()
    return A3CResult(history=history, solved=solved, eval_return=eval_return,
                     env_steps=env_steps, wall_seconds=wall, updates=stats.updates,
                     weights=weights.weights, updates_per_second=stats.updates / wall,
                     staleness=stats.staleness, staleness_senders=stats.senders,
                     skipped_updates=stats.skipped,
                     gradients_by_worker={0: len(stats.staleness)})


def train_a3c_ray(config: A2CConfig, **options: Any) -> A3CResult:
    """A3C: each worker's gradient is applied as soon as it arrives, and that worker alone gets
    the new weights and goes on; no worker waits for another.

    Args:
        config: Run settings: ``config.num_workers`` gradient workers, each computing its
            gradient on ``envs_per_worker * n_steps`` rows of its env (``worker_env_ids``:
            an id per worker, ``None`` for ``env_id``); ``eval_every=None`` evaluates never.
        options: :class:`~rlkit.distributed.runtime.driver.RunOptions` fields (``progress``,
            ``timeout_s``, ``max_restarts``, ``kill_at``, ``checkpoint_dir``,
            ``checkpoint_every`` (default 500 updates), ``resume_from``); the roles are
            ``"worker i"`` and ``"gradient server"``, whose network and Adam state a
            checkpoint holds (an A2C checkpoint resumes under A3C and the other way round).
    """
    require_instance("train_a3c_ray", "config", config, A2CConfig, "train_a3c_ray(A2CConfig(...))")
    return A3CRun(config, build(RunOptions, "train_a3c_ray", options)).run()


def train_a2c_ray(config: A2CConfig, **options: Any) -> A3CResult:
    """A2C: every round, all workers compute a gradient on the same weights; the server
    averages the round's gradients and applies them once. A round lasts as long as its slowest
    worker. Arguments as :func:`train_a3c_ray`; a worker that fails is replaced and the round
    goes on with the gradients that arrived."""
    require_instance("train_a2c_ray", "config", config, A2CConfig, "train_a2c_ray(A2CConfig(...))")
    return A2CRun(config, build(RunOptions, "train_a2c_ray", options)).run()


class GradientServerRun(DriverRun):
    """What A3C and A2C share on the :class:`DriverRun` loop: the roles, receiving a gradient
    (or restarting the worker that failed to send one), evaluating, the result."""

    NAME = "A3C"
    LEARNER = "gradient server"
    CHECKPOINT_EVERY = 500

    def __init__(self, config: A2CConfig, options: RunOptions) -> None:
        num_workers = config.num_workers
        super().__init__(options, config.total_steps, f"{self.NAME} ({num_workers} workers)",
                         "A2C", config)
        self.plan = self.place(num_workers)
        # each env is built here, not only in an actor, so a bad id fails before any starts
        self.env_ids, self.sizes = check_worker_env_ids(config.worker_env_ids, num_workers,
                                                        config.env_id, config.seed, "discrete",
                                                        "A2C")
        self.config, self.num_workers = config, num_workers
        self.by_worker: dict[int, int] = {}
        self.weights_ref: Any = None  # the server's latest answer: (weights, version)
        self.unapplied_steps = 0  # counted, but their gradients not yet sent to the server
        # (env step, seconds, episode returns, loss) of those gradients: logged once applied
        self.unlogged: list[tuple[int, float, list[float], float]] = []

    def role_names(self) -> list[str]:
        return ["gradient server"] + [f"worker {i}" for i in range(self.num_workers)]

    def start_roles(self) -> None:
        import ray

        sup, config = self.supervisor, self.config
        server = sup.start("gradient server", lambda r: ray.remote(GradientServer).options(
            **sup.options("gradient server")).remote(config))
        for i, env_id in enumerate(self.env_ids):
            sup.start(f"worker {i}", lambda r, i=i, e=env_id: ray.remote(GradientWorker).options(
                **sup.options(f"worker {i}")).remote(config, i, e, r))
        timeout = max(STARTUP_TIMEOUT_S, self.options.timeout_s)
        sup.wait_started(list(sup.handles), timeout)
        self.restore_learner(timeout)
        self.weights_ref = server.weights.remote()

    def done(self) -> bool:
        return self.solved or self.env_steps >= self.total_steps

    def launch(self, i: int) -> None:
        """Ask worker ``i`` for a gradient on the server's latest weights (passed as a
        reference: the weights go server -> worker without the driver); not a dropped one."""
        if f"worker {i}" not in self.supervisor.handles:  # dropped: its node is gone
            return
        ref = self.supervisor[f"worker {i}"].compute_gradient.remote(self.weights_ref)
        self.expect(ref, f"worker {i}", lambda r, i=i: self.on_gradient(r, i))

    def on_gradient(self, ref: Any, i: int) -> None:
        raise NotImplementedError

    def receive(self, ref: Any, i: int) -> GradientMessage | None:
        """Worker ``i``'s gradient message, counted (its episodes and loss are logged when the
        server is sent the gradient: :meth:`applied`); ``None`` after restarting a worker that
        failed (a dead server is named as such, not blamed on the worker)."""
        from ray.exceptions import RayError

        try:
            message = self.supervisor.get(ref, f"worker {i}", "computing a gradient")
        except RayError as error:
            self.supervisor.restart(f"worker {i}", error, self.env_steps)
            return None
        self.env_steps += message.env_steps
        self.unapplied_steps += message.env_steps
        self.by_worker[i] = self.by_worker.get(i, 0) + 1
        self.unlogged.append((self.env_steps, self.clock(), list(message.episode_returns),
                              message.loss))
        return message

    def applied(self) -> None:
        """The gradients received so far were sent to the server: their steps are behind its
        state, and their episodes and losses go into the history. A checkpoint taken before
        (a Ctrl-C mid-round) holds neither, as its server has not trained on them."""
        # the counts first: a Ctrl-C inside the loop may cost the history a log, never a count
        unlogged, self.unlogged, self.unapplied_steps = self.unlogged, [], 0
        for env_steps, seconds, returns, loss in unlogged:
            for ret in returns:
                self.history.log_episode(env_steps, seconds, ret)
            self.history.log_loss(env_steps, loss)

    def checkpoint_env_steps(self) -> int:
        """The env steps behind the server's state: the count, less the steps of gradients
        received but not yet sent to the server (an A2C round still arriving, or the moment
        between an A3C gradient's arrival and its ``apply``), which a Ctrl-C can fall into."""
        return self.env_steps - self.unapplied_steps

    def maybe_evaluate(self) -> None:
        """A greedy evaluation, in the driver, every ``eval_every`` env steps and at the end."""
        cfg, evals = self.config, len(self.history.eval_steps)
        if cfg.eval_every is not None and evaluation_due(
                self.env_steps, self.history.eval_steps, cfg.eval_every, self.total_steps):
            weights = self.supervisor.get(self.weights_ref, "gradient server",
                                          "sending its weights").weights
            mean, std = greedy_eval(weights, *self.sizes, cfg, evals)
            self.log_evaluation(self.env_steps, self.clock(), mean, std, cfg.target_return)

    def finish(self) -> None:
        sup = self.supervisor
        self.wall = self.clock()
        self.stats = sup.get(sup["gradient server"].stats.remote(), "gradient server",
                             "reading its statistics")
        self.weights = sup.get(self.weights_ref, "gradient server", "sending its weights")
        self.save()

    def result(self) -> A3CResult:
        stats = self.stats
        return A3CResult(
            history=self.history, solved=self.solved, eval_return=self.eval_return,
            env_steps=self.env_steps, wall_seconds=self.wall, updates=stats.updates,
            weights=self.weights.weights, startup_seconds=self.startup_seconds,
            worker_restarts=self.supervisor.restart_count("worker"),
            updates_per_second=stats.updates / self.wall, staleness=stats.staleness,
            staleness_senders=stats.senders, skipped_updates=stats.skipped,
            gradients_by_worker=dict(sorted(self.by_worker.items())))


class A3CRun(GradientServerRun):
    """A3C: a gradient is applied as it arrives; only its sender waits for the answer."""

    def train(self) -> None:
        for i in range(self.num_workers):
            self.launch(i)
        super().train()

    def schedule(self) -> None:
        """Nothing waits for a schedule: each gradient relaunches its own worker."""

    def on_gradient(self, ref: Any, i: int) -> None:
        if self.receive(ref, i) is not None:
            # the reference, not the array: the gradient goes worker -> server directly
            self.weights_ref = self.supervisor["gradient server"].apply.remote(ref)
            self.applied()  # (the server applies its calls in order)
            self.updates += 1
            self.maybe_save(self.updates)
            self.maybe_evaluate()
        self.launch(i)


class A2CRun(GradientServerRun):
    """A2C: the same roles with a barrier; :meth:`schedule` starts a round only when the last
    one is complete, and applies its mean gradient first."""

    NAME = "A2C"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.arrived: list[Any] = []  # this round's gradients, as references

    def on_gradient(self, ref: Any, i: int) -> None:
        if self.receive(ref, i) is not None:
            self.arrived.append(ref)

    def schedule(self) -> None:
        if self.pending:  # the round is not complete
            return
        if self.arrived:
            self.weights_ref = self.supervisor["gradient server"].apply_mean.remote(
                *self.arrived)
            self.arrived = []
            self.applied()
            self.updates += 1
            self.maybe_save(self.updates)
            self.maybe_evaluate()
        if not self.done():
            for i in range(self.num_workers):
                self.launch(i)
