"""Keeping a run's actors alive and accountable: start, restart, wait with timeouts, kill.

A driver names each actor by its role (``"learner"``, ``"evaluator"``, ``"worker 0"``)
and starts it through a :class:`Supervisor`. From then on, every wait has a timeout, every
failure comes back as an error that names the role and the fix, a role that dies can be
restarted (each at most ``max_restarts`` times, each restart logged in the history), and when
the ``with`` block ends, normally or not, every actor the run started is killed. Fault
injection (kill a role at a given env step) lives here too, for demos and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlkit.core.metrics import History
from rlkit.distributed.runtime.actor_state import (EXIT_TIMEOUT_S, actor_state, describe_error,
                                                   nodes_of, silently_gone, wait_gone)
from rlkit.distributed.runtime.failures import (RESTARTABLE, FailureNaming, LearnerFailedError,
                                                RoleFailedError)
from rlkit.distributed.runtime.placement import ResourcePlan, cluster_nodes

__all__ = ["STARTUP_TIMEOUT_S", "LearnerFailedError", "RoleFailedError", "Supervisor"]

if TYPE_CHECKING:  # Ray itself is imported only where it is used
    from ray import ObjectRef
    from ray.actor import ActorHandle

#: The least time the driver waits for its actors to start (processes, torch imports).
STARTUP_TIMEOUT_S = 120.0


#: Further fault injectors, each called with the supervisor and the env steps at every step of
#: every run (:func:`rlkit.distributed.runtime.faults.lose_node_at` adds one for its block).
FAULT_HOOKS: list[Callable[[Supervisor, int], None]] = []

class Supervisor(FailureNaming):
    """Starts a run's actors, restarts the ones that fail, and kills them all at the end.

    Args:
        timeout_s: Longest wait for any actor before raising ``TimeoutError`` naming it.
        max_restarts: Restarts allowed per role before the run gives up.
        history: Where restart events are logged.
        last_checkpoint: Called for the newest checkpoint path, named in a learner failure.
        checkpoint_dir: The run's ``checkpoint_dir`` (``None``: it keeps no checkpoints).
        plan: Where each role goes (:func:`~rlkit.distributed.runtime.placement.plan_resources`);
            the drivers' factories ask :meth:`options`, and a replacement for an actor whose
            node is gone is placed on a node with room, or dropped (:meth:`restart`).
    """

    def __init__(self, timeout_s: float, max_restarts: int, history: History,
                 last_checkpoint: Callable[[], Path | None] = lambda: None,
                 checkpoint_dir: str | Path | None = None,
                 plan: ResourcePlan | None = None) -> None:
        self.plan = plan
        self.timeout_s = timeout_s
        self.checkpoint_dir = checkpoint_dir
        self.max_restarts = max_restarts
        self.history = history
        self.last_checkpoint = last_checkpoint
        self.handles: dict[str, ActorHandle] = {}
        self.factories: dict[str, Callable[[int], ActorHandle]] = {}
        self.restarts: dict[str, int] = {}
        #: Added to the restart number each factory is given: 1000 per resume of the run
        #: (:func:`~rlkit.core.common.worker_seed`), so a resumed run's workers draw new random
        #: streams instead of replaying the first run's.
        self.incarnation_base = 0
        self.started: list[ActorHandle] = []  # everything ever started, killed at the end
        self.kill_at: dict[str, int] = {}  # role -> env step at which to kill it (fault demo)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        for handle in self.started:
            ray.kill(handle, no_restart=True)
        wait_gone(self.started, EXIT_TIMEOUT_S)

    def __getitem__(self, role: str) -> ActorHandle:
        return self.handles[role]

    def options(self, role: str, **extra: Any) -> dict[str, Any]:
        """``.options(...)`` for ``role``'s actor from the plan (``extra`` added)."""
        return extra if self.plan is None else self.plan.options(role, **extra)

    def start(self, role: str, make: Callable[[int], ActorHandle]) -> ActorHandle:
        """Start ``make(restart)`` as ``role`` (``restart``: :attr:`incarnation_base` plus the
        role's restarts so far, 0 at first); ``make`` is kept to restart it later."""
        self.factories[role], self.restarts[role] = make, 0
        return self._launch(role)

    def relaunch(self, role: str) -> ActorHandle:
        """Start ``role`` again (its next random stream), where the plan now says."""
        self.restarts[role] += 1
        return self._launch(role)

    def _launch(self, role: str) -> ActorHandle:
        self.handles[role] = handle = self.factories[role](self.incarnation_base
                                                           + self.restarts[role])
        self.started.append(handle)
        return handle

    def restart(self, role: str, error: BaseException, env_steps: int) -> ActorHandle | None:
        """Replace a failed actor (with its next random stream) and log why. If its node is
        gone (or does not answer), the replacement goes to the node with the most CPUs left,
        asking for what is left there; with no room anywhere the role is dropped (``None``;
        logged) and the run goes on without it.

        Raises:
            RuntimeError: if ``role`` has already been restarted ``max_restarts`` times.
            FloatingPointError: ``error`` itself, if it is one (a NaN from the role's env, a
                non-finite loss): a replacement would meet the same value again.
        """
        import ray

        if isinstance(error, FloatingPointError):
            raise error
        dead = self.dead_roles()
        if any(not r.startswith(RESTARTABLE) for r in dead):  # a server died: no restart helps
            raise self.failure(error, role, "running", dead) from error
        lost = self.plan.node(role) if self.plan is not None and role in self.plan.slots else None
        gone = lost.node_id if lost and silently_gone(self.handles[role]) else ""  # ask first
        ray.kill(self.handles[role], no_restart=True)
        if lost is not None:
            nodes = [n for n in cluster_nodes() if n.node_id != gone]
            moved = self.plan.moved(role, nodes, [r for r in self.handles if r != role])
            if moved is None:
                del self.handles[role]
                self.history.events.append(
                    f"step {env_steps}: {role} lost with {lost} ({describe_error(error)}); no "
                    f"node has room for a replacement: the run goes on without it")
                if not any(r.startswith("worker") for r in self.handles):
                    raise RoleFailedError(
                        f"every worker was lost with its node ({lost} the last), no node has "
                        f"room for one, and the run cannot go on. Fix: add nodes, then resume "
                        f"from the last checkpoint ({self.last_checkpoint()}).", role) from error
                return None
            if moved is not self.plan:
                self.history.events.append(f"step {env_steps}: {role} lost with {lost}; its "
                                           f"replacement goes to {moved.node(role)}")
            self.plan = moved
        self.restarts[role] += 1
        n = self.restarts[role]
        if n > self.max_restarts:
            raise RuntimeError(f"{role} failed {n} times; the last error: "
                               f"{describe_error(error)}. Fix: the same failure keeps coming "
                               f"back: run the environment or evaluation alone (rlkit.envs.make."
                               f"make_env, rlkit.envs.evaluation.evaluate_policy) to debug it, "
                               f"or raise max_restarts.") from error
        self.history.events.append(f"step {env_steps}: {role} failed "
                                   f"({describe_error(error)}); restarted (restart {n})")
        return self._launch(role)

    def where(self) -> dict[str, str]:
        """``{role: node id}`` of every running role, as Ray's actor table says."""
        return nodes_of(self.handles)

    def restart_count(self, prefix: str) -> int:
        """Restarts of every role whose name starts with ``prefix``."""
        return sum(n for role, n in self.restarts.items() if role.startswith(prefix))

    def get(self, ref: ObjectRef, role: str, doing: str, timeout: float | None = None) -> Any:
        """``ray.get`` with a timeout; a failure becomes an error naming ``role``.

        Raises:
            TimeoutError: if ``role`` did not answer in time.
            FloatingPointError: if the role raised one (a non-finite loss), with its message.
            RoleFailedError: if a role that cannot be replaced died or raised (the learner:
                :class:`LearnerFailedError`), naming it, even when the call was to another
                role that failed because of it; and the last checkpoint.
            ray.exceptions.RayError: a worker's or the evaluator's own failure, for the
                caller to restart it.
        """
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        try:
            return ray.get(ref, timeout=timeout or self.timeout_s)
        except GetTimeoutError as error:
            raise TimeoutError(f"the {role} did not answer within timeout_s={self.timeout_s} s "
                               f"while {doing}. Fix: check its log, or raise timeout_s if it "
                               f"is that slow.") from error
        except RayError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, FloatingPointError):
                raise FloatingPointError(f"the {role} stopped while {doing}: {cause} (last "
                                         f"checkpoint: {self.last_checkpoint()})") from error
            if not role.startswith(RESTARTABLE):
                raise self.failure(error, role, doing) from error
            raise

    def alive(self, role: str) -> bool:
        """Whether ``role`` answers a trivial call (``ping``) within the timeout."""
        import ray
        from ray.exceptions import RayError

        try:
            ray.get(self.handles[role].ping.remote(), timeout=self.timeout_s)
            return True
        except RayError:
            return False

    def wait_one(self, refs: list[ObjectRef],
                 waiting_for: Callable[[], tuple[str, str]]) -> ObjectRef:
        """The first of ``refs``, in their order, that is ready once any is: the driver passes
        its calls oldest first, so each is served in turn. (``ray.wait`` returns an arbitrary
        ready one: a driver with always a worker's fragment ready left an evaluation that had
        finished unread for 90 s and 10,000 env steps, and a run that had solved trained on.)
        If none is ready within the timeout (an environment that hangs surfaces here),
        ``TimeoutError`` names ``who, detail = waiting_for()``."""
        import ray

        ready, _ = ray.wait(refs, num_returns=1, timeout=self.timeout_s)
        if not ready:
            who, detail = waiting_for()
            raise TimeoutError(f"{who} did not answer within timeout_s={self.timeout_s} s "
                               f"({detail}). Fix: check the actors' logs (an environment may "
                               f"hang), or raise timeout_s.")
        now_ready = set(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) | {ready[0]}
        return next(ref for ref in refs if ref in now_ready)

    def wait_started(self, roles: list[str], timeout: float) -> None:
        """Wait until every role answers ``ping`` (processes up, imports done). An actor that
        died starting (its constructor raised, its node was lost) ends in :meth:`failure`, named
        with its node and the checkpoint; a timeout names only the roles still pending, and why
        (no node with room, or still starting)."""
        import ray
        from ray.exceptions import RayError

        pings = {self.handles[r].ping.remote(): r for r in roles}
        ready, waiting = ray.wait(list(pings), num_returns=len(pings), timeout=timeout)
        for ref in ready:
            try:
                ray.get(ref)
            except RayError as error:
                raise self.failure(error, pings[ref], "starting") from error
        if waiting:
            why = []
            for ref in waiting:
                role = pings[ref]
                if actor_state(self.handles[role]).get("State") == "PENDING_CREATION":
                    cpus = self.options(role).get("num_cpus", 1)
                    why.append(f"{role} (pending: no node has room for its {cpus:g} CPU)")
                else:
                    why.append(f"{role} (started, not answering yet)")
            raise TimeoutError(f"{', '.join(why)} did not start within {timeout} s. Fix: "
                               f"check that the cluster's nodes have room for them (ray status) "
                               f"and the actors' logs.")

    def inject_faults(self, env_steps: int) -> None:
        """Kill each role scheduled in ``kill_at`` once ``env_steps`` reaches its step (for
        demos and tests of recovery; the run then meets the failure as a real one)."""
        import ray

        for role, at in list(self.kill_at.items()):
            if env_steps >= at:
                del self.kill_at[role]
                ray.kill(self.handles[role], no_restart=True)
        for hook in list(FAULT_HOOKS):
            hook(self, env_steps)
