"""The one driver skeleton every distributed pattern fills in (their options: ``options.py``).

A pattern subclasses :class:`DriverRun` and writes:

* ``role_names()``: the roles it will start (checked against ``kill_at`` before any starts);
* ``start_roles()``: start its actors through ``self.supervisor``;
* ``schedule()``: launch what is due now (a fragment, a learner call, an evaluation, the next
  round), registering each call with ``self.expect(ref, role, self.on_<event>)``;
* one ``on_<event>(ref)`` handler per kind of call;
* ``done()`` and ``result()``.

:meth:`DriverRun.train` is then the same loop for the four patterns: wait for the next finished
call, hand it to its handler, inject any scheduled fault, schedule what is now due; until the
run is done or nothing is left in flight. :meth:`DriverRun.run` wraps it in the supervisor, so
every actor is killed when the run ends, however it ends.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlkit.core.common import resume_generation
from rlkit.core.metrics import History, RunResult
from rlkit.core.timeline import NoTimeline, TimelineRecorder, handler_name
from rlkit.core.validation import fail
from rlkit.distributed.runtime.cluster import require_ray
from rlkit.distributed.runtime.learner_calls import LearnerCalls
from rlkit.distributed.runtime.options import RunOptions
from rlkit.distributed.runtime.placement import (MIN_WORKER_CPUS, ResourcePlan, cluster_nodes,
                                                 free_memory_on, plan_resources, workers_to_fill)
from rlkit.distributed.runtime.supervisor import RoleFailedError, Supervisor
from rlkit.notebook.progress import ProgressBar
from rlkit.train.checkpoint import Checkpointer, load_checkpoint
from rlkit.train.interrupts import save_on_interrupt

if TYPE_CHECKING:
    from ray import ObjectRef


Handler = Callable[["ObjectRef"], None]


class DriverRun(LearnerCalls):
    """The loop every driver shares; a pattern fills in the methods listed in the module
    docstring.

    Checkpoints are the skeleton's too: the role named :attr:`LEARNER` answers
    ``state(include_buffer) -> LearnerState`` and ``restore(learner, buffer)``; the run saves
    every ``checkpoint_every`` of its updates (:meth:`maybe_save`), at the end of
    :meth:`finish` (:meth:`save`) and on Ctrl-C, and a resumed run starts from the
    checkpoint's env steps, history and clock (:meth:`restore_learner` in ``start_roles``).

    Args:
        options: The run's :class:`RunOptions`.
        total_steps: The env-step budget (for the progress bar).
        name: The bar's label.
        algorithm: The name checkpoints are written and checked under (``"IMPALA"``).
        config: The algorithm's config (a checkpoint resumes only the same env and network).
    """

    #: The role whose state a checkpoint holds.
    LEARNER = "learner"
    #: Learner updates between checkpoints when ``checkpoint_every`` is not given.
    CHECKPOINT_EVERY = 5_000
    #: Whether checkpoints hold the learner's replay (the off-policy driver's option).
    SAVE_BUFFER = False
    #: Whether this driver runs learner groups (``num_learners > 1``).
    LEARNER_GROUPS = False
    #: Whether it restarts its learner (group) from a checkpoint (``learner_restarts``).
    LEARNER_RESTARTS = False

    def __init__(self, options: RunOptions, total_steps: int, name: str, algorithm: str,
                 config: Any) -> None:
        for option, runs in (("num_learners", self.LEARNER_GROUPS),
                             ("learner_restarts", self.LEARNER_RESTARTS)):
            value = getattr(options, option)
            if value != RunOptions.__dataclass_fields__[option].default and not runs:
                fail(option, value, f"is not supported by {type(self).__name__} yet",
                     f"leave {option} out, or use a driver that supports it (train_dqn_ray, "
                     f"train_sac_ray, train_apex_ray, train_impala_ray)")
        self.options = options
        self.resumed = (None if options.resume_from is None else
                        load_checkpoint(options.resume_from, algorithm, config))
        self.history = History() if self.resumed is None else self.resumed.history
        self.updates = 0 if self.resumed is None else self.resumed.updates
        self.checkpointer = Checkpointer(options.checkpoint_dir,
                                         options.checkpoint_every or self.CHECKPOINT_EVERY,
                                         self.SAVE_BUFFER, algorithm, config, self.updates)
        self.supervisor = Supervisor(options.timeout_s, options.max_restarts, self.history,
                                     lambda: self.checkpointer.last, options.checkpoint_dir)
        self.pending: dict[ObjectRef, tuple[str, Handler]] = {}
        self.env_steps = 0
        self.saved_env_steps = 0  # the env steps the last checkpoint recorded
        self.solved, self.eval_return = False, math.nan
        self.startup_seconds, self.started = 0.0, False
        self.placement: dict[str, str] = {}
        self.learner_roles = [self.LEARNER]
        self.init_learner_calls()
        self.total_steps, self.name = total_steps, name
        self.bar = ProgressBar(False, total_steps, 0, name)
        self.start_time = time.perf_counter()
        self.clock_offset = 0.0  # a resumed run's seconds before its checkpoint
        # every call and event, for the result (or nothing: the overhead benchmark's control)
        self.timeline = (TimelineRecorder if options.timeline else NoTimeline)(self.clock)
        if self.resumed is not None:
            self.env_steps, self.clock_offset = self.resumed.env_steps, self.resumed.wall_seconds
            self.history.events.append(f"step {self.env_steps}: resumed from "
                                       f"{self.resumed.path}")
        self.supervisor.incarnation_base = resume_generation(self.history.events)

    # --- what a pattern writes ------------------------------------------------------------

    def role_names(self) -> list[str]:
        raise NotImplementedError

    def start_roles(self) -> None:
        raise NotImplementedError

    def schedule(self) -> None:
        raise NotImplementedError

    def done(self) -> bool:
        raise NotImplementedError

    def finish(self) -> None:
        """After the loop: drain what is still needed (a last evaluation, statistics)."""

    def interrupt_guard(self) -> AbstractContextManager[None]:
        """What a Ctrl-C does before it goes through: save a checkpoint (if
        ``checkpoint_dir`` is set), say where, and let the interrupt stop the run."""
        return save_on_interrupt(self.save_on_stop, lambda: self.saved_env_steps)

    def result(self) -> RunResult:
        raise NotImplementedError

    def place(self, num_workers: int, learner_gpus: float | None = 0.0, shards: int = 0
              ) -> ResourcePlan:
        """Plan every CPU role on the cluster's alive nodes (refused here, before any actor
        starts, if it cannot be placed) and hand the plan to the supervisor."""
        require_ray()
        self.supervisor.plan = plan_resources(num_workers, cluster_nodes(), learner_gpus,
                                              shards=shards, learners=self.options.num_learners,
                                              learner_role=self.LEARNER)
        self.learner_roles = list(self.supervisor.plan.learner_roles)
        self.LEARNER = self.learner_roles[0]  # rank 0 holds the state a checkpoint keeps
        plan = self.supervisor.plan
        if plan.learner_halved:
            self.history.events.append(
                f"step {self.env_steps}: num_workers={num_workers} is more than the "
                f"{plan.whole_learner_workers} that fit beside a learner on a whole CPU "
                f"({MIN_WORKER_CPUS} CPU each): the learner gets {plan.learner_cpus:g} CPU")
        if plan.idle_cpus >= 1:  # the default worker count does not grow with the cluster
            fill = workers_to_fill(plan.nodes, len(self.learner_roles), shards)
            self.history.events.append(
                f"step {self.env_steps}: the plan leaves {plan.idle_cpus:g} of "
                f"{sum(n.cpus for n in plan.nodes):g} CPUs idle; num_workers={fill} would use "
                f"them (rlkit.distributed.runtime.placement.workers_to_fill)")
        return plan

    def learner_free_memory(self) -> tuple[int | None, str]:
        """RAM free on the learner's node (``None``: this machine's) and where, for the
        buffer memory check."""
        node = self.supervisor.plan.node(self.LEARNER) if self.supervisor.plan else None
        if node is None or node.driver:
            return None, ""
        return free_memory_on(node), f" (the learner's {node})"

    # --- checkpoints ----------------------------------------------------------------------

    def restore_learner(self, timeout: float) -> None:
        """In ``start_roles``, before the learner publishes: load a resumed run's state (into
        every rank of a group)."""
        if self.resumed is not None:
            self.load_learners(self.resumed.learner, self.resumed.buffer, timeout)

    def save(self) -> Path | None:
        """Write a checkpoint now (nothing without ``checkpoint_dir``); its path."""
        if self.checkpointer.directory is None:
            return None
        sup = self.supervisor
        env_steps = self.saved_env_steps = self.checkpoint_env_steps()  # what it will say
        return self.checkpointer.save(
            lambda with_buffer: sup.get(sup[self.LEARNER].state.remote(with_buffer),
                                        self.LEARNER, "saving a checkpoint"),
            env_steps, self.clock(), self.history)

    def checkpoint_env_steps(self) -> int:
        """The env steps behind the learner state a checkpoint is about to read: the run's
        count, where the driver hands the learner its data itself (a pattern whose learner
        is still training on data the driver has not counted yet says otherwise)."""
        return self.env_steps

    def maybe_save(self, updates: int) -> None:
        """Save if ``checkpoint_every`` updates have passed since the last checkpoint (a
        learner rank found lost meanwhile restarts the group, where allowed)."""
        if self.checkpointer.due(updates):
            try:
                self.save()
            except RoleFailedError as error:
                self.recover_learners(error)

    def save_on_stop(self) -> Path | None:
        """The interrupt's save: only once the actors are up, and without long waits."""
        if not self.started:
            return None
        self.supervisor.timeout_s = min(self.supervisor.timeout_s, 10.0)
        return self.save()

    # --- the shared skeleton --------------------------------------------------------------

    def check_options(self) -> None:
        """Refuse a ``kill_at`` naming a role this run will not start (before any starts)."""
        roles = self.role_names()
        unknown = sorted(set(self.options.kill_at) - set(roles))
        if unknown:
            fail("kill_at", dict(self.options.kill_at), f"names {unknown}, which this run does "
                 f"not start", f"use one of {roles}")

    def run(self) -> RunResult:
        """Check the options, start the roles, train, finish; every actor is killed at the
        end, also on an error or a ``KeyboardInterrupt``."""
        self.check_options()
        try:
            with self.supervisor, self.interrupt_guard():
                begin = time.perf_counter()
                self.start_roles()
                self.placement = self.supervisor.where()
                self.supervisor.kill_at = dict(self.options.kill_at)
                self.startup_seconds = time.perf_counter() - begin
                self.started, self.start_time = True, time.perf_counter()
                self.bar = ProgressBar(self.options.progress, self.total_steps, self.env_steps,
                                       self.name)
                self.train()
                self.finish()
        finally:
            self.bar.close(self.solved, eval=f"{self.eval_return:.0f}")
        result = self.result()
        result.placement, result.timeline = self.placement, self.timeline.timeline()
        return result

    def expect(self, ref: ObjectRef, role: str, handler: Handler) -> None:
        """Register a call in flight: when ``ref`` is ready, ``handler(ref)`` runs."""
        self.pending[ref] = (role, handler)
        self.timeline.launched(ref, role, handler_name(handler))

    def train(self) -> None:
        """Wait for the next finished call, dispatch it, schedule; until done. Once a run is
        solved nothing new is launched (an evaluation due meanwhile would score weights
        trained past the ones that solved)."""
        self.schedule()
        while self.pending and not self.done():
            ref = self.supervisor.wait_one(list(self.pending), self.waiting_for)
            _, handler = self.pending.pop(ref)
            begin = self.timeline.answered(ref)
            handler(ref)
            self.supervisor.inject_faults(self.env_steps)
            if not self.solved:
                self.schedule()
            self.timeline.handled(handler_name(handler), begin)
            self.bar.update(self.env_steps, ret=f"{self.history.recent_return():.0f}",
                            eval=f"{self.eval_return:.0f}")

    def drain(self, role: str) -> None:
        """Wait for every call of ``role`` in flight and run its handler, until none is left
        (a handler may launch another: a failed evaluator restarted evaluates again)."""
        while refs := [r for r, (who, _) in self.pending.items() if who == role]:
            _, handler = self.pending.pop(refs[0])
            handler(refs[0])
            self.timeline.answered(refs[0])

    def settle(self, roles: list[str], timeout: float) -> None:
        """Wait (at most ``timeout`` s) for the calls of ``roles`` in flight, unhandled."""
        import ray

        calls = [ref for ref, (who, _) in self.pending.items() if who in roles]
        ray.wait(calls, num_returns=len(calls), timeout=timeout)

    def waiting_for(self) -> tuple[str, str]:
        """Who the loop is waiting for, named in a timeout: ``("worker 0 or evaluator", ...)``."""
        roles = sorted({role for role, _ in self.pending.values()})
        return " or ".join(roles), f"waiting after {self.env_steps} env steps"

    def clock(self) -> float:
        """Seconds of training so far (from the end of start-up; plus a resumed run's)."""
        return self.clock_offset + time.perf_counter() - self.start_time

    def log_evaluation(self, env_steps: int, seconds: float, mean: float, std: float,
                       target: float | None) -> None:
        """Log an evaluation (mean and std of its returns) and decide whether it solved."""
        self.eval_return = float(mean)
        self.history.log_eval(env_steps, seconds, self.eval_return, float(std))
        self.solved = target is not None and self.eval_return >= target
