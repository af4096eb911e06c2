"""The one driver skeleton that every distributed pattern fills in, and the options all of them
share (:class:`RunOptions`); their results extend :class:`rlkit.core.metrics.RunResult`.

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
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlkit.core.validation import Validated, fail, flag, integer, number, role_steps
from rlkit.core.metrics import History, RunResult
from rlkit.distributed.runtime.supervisor import Supervisor
from rlkit.notebook.progress import ProgressBar

if TYPE_CHECKING:
    from ray import ObjectRef


@dataclass(frozen=True)
class RunOptions(Validated):
    """How a distributed run runs, the same for every driver (what it learns is the config's).

    Attributes:
        progress: Show a progress bar.
        timeout_s: Longest wait for any actor before a ``TimeoutError`` naming its role
            (start-up may take up to ``max(timeout_s, STARTUP_TIMEOUT_S)``).
        max_restarts: Restarts allowed per restartable role (each worker, the evaluator).
        kill_at: Fault injection for demos and tests: ``{role: env_steps}`` kills that role
            (``ray.kill``) once the run has counted that many env steps, e.g.
            ``{"worker 0": 2_000}``; the run then meets the failure as a real one.
    """

    progress: bool = flag(False)
    timeout_s: float = number(120.0, above=0, fix="use e.g. timeout_s=120.0; a hang then "
                              "surfaces as an error after that long",
                              meaning="seconds")
    max_restarts: int = integer(3, 0)
    kill_at: Mapping[str, int] = role_steps({})


Handler = Callable[["ObjectRef"], None]


class DriverRun:
    """The loop every driver shares; a pattern fills in the methods listed in the module
    docstring.

    Args:
        options: The run's :class:`RunOptions`.
        total_steps: The env-step budget (for the progress bar).
        name: The bar's label.
        history: The history to log into (a resumed run passes its checkpoint's).
        last_checkpoint: The newest checkpoint path, named when the learner fails.
    """

    def __init__(self, options: RunOptions, total_steps: int, name: str,
                 history: History | None = None,
                 last_checkpoint: Callable[[], Any] = lambda: None) -> None:
        self.options = options
        self.history = History() if history is None else history
        self.supervisor = Supervisor(options.timeout_s, options.max_restarts, self.history,
                                     last_checkpoint, hasattr(options, "checkpoint_dir"))
        self.pending: dict[ObjectRef, tuple[str, Handler]] = {}
        self.env_steps = 0
        self.solved, self.eval_return = False, math.nan
        self.startup_seconds, self.started = 0.0, False
        self.total_steps, self.name = total_steps, name
        self.bar = ProgressBar(False, total_steps, 0, name)
        self.start_time = time.perf_counter()
        self.clock_offset = 0.0  # a resumed run's seconds before its checkpoint

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
        """What a Ctrl-C does before it goes through (the off-policy driver saves a
        checkpoint); by default nothing."""
        return nullcontext()

    def result(self) -> RunResult:
        raise NotImplementedError

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
                self.supervisor.kill_at = dict(self.options.kill_at)
                self.startup_seconds = time.perf_counter() - begin
                self.started, self.start_time = True, time.perf_counter()
                self.bar = ProgressBar(self.options.progress, self.total_steps, self.env_steps,
                                       self.name)
                self.train()
                self.finish()
        finally:
            self.bar.close(self.solved, eval=f"{self.eval_return:.0f}")
        return self.result()

    def expect(self, ref: ObjectRef, role: str, handler: Handler) -> None:
        """Register a call in flight: when ``ref`` is ready, ``handler(ref)`` runs."""
        self.pending[ref] = (role, handler)

    def train(self) -> None:
        """Wait for the next finished call, dispatch it, schedule; until done. Once a run is
        solved nothing new is launched (an evaluation due meanwhile would score weights
        trained past the ones that solved)."""
        self.schedule()
        while self.pending and not self.done():
            ref = self.supervisor.wait_one(list(self.pending), self.waiting_for)
            _, handler = self.pending.pop(ref)
            handler(ref)
            self.supervisor.inject_faults(self.env_steps)
            if not self.solved:
                self.schedule()
            self.bar.update(self.env_steps, ret=f"{self.history.recent_return():.0f}",
                            eval=f"{self.eval_return:.0f}")

    def drain(self, role: str) -> None:
        """Wait for every call of ``role`` in flight and run its handler, until none is left
        (a handler may launch another: a failed evaluator restarted evaluates again)."""
        while refs := [r for r, (who, _) in self.pending.items() if who == role]:
            _, handler = self.pending.pop(refs[0])
            handler(refs[0])

    def waiting_for(self) -> tuple[str, str]:
        """Who the loop is waiting for, named in a timeout: ``("worker 0 or evaluator", ...)``."""
        roles = sorted({role for role, _ in self.pending.values()})
        return " or ".join(roles), f"waiting after {self.env_steps} env steps"

    def clock(self) -> float:
        """Seconds of training so far (from the end of start-up; a resumed run adds the
        seconds before its checkpoint)."""
        return self.clock_offset + time.perf_counter() - self.start_time

    def log_evaluation(self, env_steps: int, seconds: float, mean: float, std: float,
                       target: float | None) -> None:
        """Log an evaluation (mean and std of its returns) and decide whether it solved."""
        self.eval_return = float(mean)
        self.history.log_eval(env_steps, seconds, self.eval_return, float(std))
        self.solved = target is not None and self.eval_return >= target
