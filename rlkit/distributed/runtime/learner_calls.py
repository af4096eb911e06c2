"""The driver's side of a learner group, mixed into :class:`~rlkit.distributed.runtime.driver.
DriverRun`: one call to every rank, the ranks' answers merged into the group's, and a gang
restart when a rank is lost.

A group's ranks update in step, so the driver asks all of them the same thing at once
(:meth:`LearnerCalls.ask_learners`) and acts once every rank has answered (a single learner is
a group of one). A rank that dies leaves the others blocked in their next all-reduce; with
``learner_restarts`` and a checkpoint written, the whole group is killed, re-placed where there
is room, re-formed and loaded from the checkpoint (:meth:`LearnerCalls.recover_learners`), and
the pattern asks again (``after_learner_restart``); otherwise the error naming the lost rank,
its node and the checkpoint ends the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rlkit.distributed.runtime.learner_group import form_group, restart_group
from rlkit.distributed.runtime.supervisor import STARTUP_TIMEOUT_S, RoleFailedError
from rlkit.train.checkpoint import Checkpoint, load_checkpoint

if TYPE_CHECKING:
    from ray import ObjectRef

    from rlkit.core.timeline import TimelineRecorder
    from rlkit.distributed.runtime.options import RunOptions
    from rlkit.distributed.runtime.supervisor import Supervisor
    from rlkit.train.checkpoint import Checkpointer


class LearnerCalls:
    """The learner group's calls, answers and restarts; :class:`DriverRun` provides the
    attributes below."""

    supervisor: Supervisor
    options: RunOptions
    checkpointer: Checkpointer
    learner_roles: list[str]
    pending: dict[ObjectRef, tuple[str, Callable[[ObjectRef], None]]]
    timeline: TimelineRecorder
    env_steps: int
    updates: int
    history: Any
    expect: Callable[..., None]

    def init_learner_calls(self) -> None:
        self.calls = 0  # calls asked of the group so far
        self.answers: dict[int, dict[int, Any]] = {}  # by call, then rank
        self.group_restarts = 0

    def ask_learners(self, method: str, args: Sequence[Any], doing: str,
                     on_answer: Callable[[list[Any]], None]) -> None:
        """Call ``method(*args)`` on every rank; once all have answered, ``on_answer`` gets
        their answers in rank order. A lost rank restarts the group, if allowed."""
        self.calls += 1
        for rank, role in enumerate(self.learner_roles):
            ref = getattr(self.supervisor[role], method).remote(*args)
            self.expect(ref, role, lambda r, rank=rank, call=self.calls:
                        self.on_rank_answer(r, rank, call, doing, on_answer))

    def on_rank_answer(self, ref: ObjectRef, rank: int, call: int, doing: str,
                       on_answer: Callable[[list[Any]], None]) -> None:
        try:
            answer = self.supervisor.get(ref, self.learner_roles[rank], doing)
        except RoleFailedError as error:
            self.recover_learners(error)
            return
        arrived = self.answers.setdefault(call, {})
        arrived[rank] = answer
        if len(arrived) == len(self.learner_roles):  # (each rank answers its calls in order)
            del self.answers[call]
            on_answer([arrived[r] for r in range(len(self.learner_roles))])

    def restart_role(self, role: str, error: BaseException) -> None:
        """Replace a failed restartable role (a worker, the evaluator); if it failed because a
        learner rank died (a node that took both), restart the learner group first."""
        try:
            self.supervisor.restart(role, error, self.env_steps)
        except RoleFailedError as lost:
            self.recover_learners(lost)
            self.supervisor.restart(role, error, self.env_steps)

    def recover_learners(self, error: RoleFailedError) -> None:
        """A lost learner rank: restart the group from its checkpoint (the calls in flight are
        dropped) and let the pattern ask again (``after_learner_restart``), or raise
        ``error``."""
        began = self.timeline.clock()
        saved = self.restart_learner_group(error)
        if saved is None:
            raise error
        self.timeline.dropped(self.learner_roles, at=began)  # the restart: a gap in their lanes
        self.pending = {r: e for r, e in self.pending.items() if e[0] not in self.learner_roles}
        self.answers = {}
        self.after_learner_restart(saved)

    def learner_restart_under_way(self, under_way: bool) -> None:
        """What a pattern does as its group's restart begins (``True``) and once the group
        is loaded (IMPALA: tell the queue)."""

    def after_learner_restart(self, saved: Checkpoint) -> None:
        """What a pattern does once its group is back at ``saved``: ask it again."""

    def form_learner_group(self, timeout: float) -> None:
        """Rendezvous the learner ranks (rank 0's TCPStore); nothing for a single learner."""
        if len(self.learner_roles) > 1:
            form_group([self.supervisor[r] for r in self.learner_roles], timeout_s=timeout)

    def load_learners(self, learner: Any, buffer: Any, timeout: float) -> None:
        """Load a checkpoint's learner state into every learner rank."""
        sup = self.supervisor  # rank 0 first: it publishes, the others read what it published
        first, *others = self.learner_roles
        sup.get(sup[first].restore.remote(learner, buffer), first, "loading the checkpoint",
                timeout)
        refs = {role: sup[role].restore.remote(learner, buffer) for role in others}
        for role, ref in refs.items():
            sup.get(ref, role, "loading the checkpoint", timeout)

    def restart_learner_group(self, error: RoleFailedError) -> Checkpoint | None:
        """After a learner rank is lost (``error`` names it), restart the whole group from the
        last checkpoint, if ``learner_restarts`` allows and one was written: every rank is
        killed (a half group would block in its next all-reduce), the lost ranks are placed
        on nodes with room, the group re-forms and loads the checkpoint. The checkpoint it
        loaded, or ``None``."""
        last = self.checkpointer.last
        if (error.role not in self.learner_roles or last is None
                or self.group_restarts >= self.options.learner_restarts):
            return None
        self.group_restarts += 1
        self.learner_restart_under_way(True)
        timeout, begin = max(self.options.timeout_s, STARTUP_TIMEOUT_S), time.perf_counter()
        # waiting for a node with room obeys the run's timeout_s; a started process may take
        # up to STARTUP_TIMEOUT_S to import (3-6 s on 2 cores, much more on a loaded machine)
        restart_group(self.supervisor, self.learner_roles, self.options.timeout_s, last, error)
        self.supervisor.wait_started(self.learner_roles, timeout)
        started = time.perf_counter()
        self.form_learner_group(timeout)
        saved = load_checkpoint(last, self.checkpointer.algorithm, self.checkpointer.config)
        self.load_learners(saved.learner, saved.buffer, timeout)
        self.learner_restart_under_way(False)
        where = ", ".join(f"{r} on {self.supervisor.plan.node(r)}" for r in self.learner_roles)
        self.history.events.append(
            f"step {self.env_steps}: {error.role} lost ({str(error).split(' (')[0]}); the "
            f"learner group restarted from {last} at update {saved.updates}, saved at "
            f"{saved.env_steps:,} env steps ({max(0, self.updates - saved.updates)} updates "
            f"lost of the {self.updates} the driver had counted; {where}) in "
            f"{time.perf_counter() - begin:.1f} s ({started - begin:.1f} s to start the ranks)")
        self.updates = saved.updates
        return saved
