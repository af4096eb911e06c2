"""Naming a failure right: which role really failed (a worker's call fails when the server it
talks to died), its node, every role lost with that node, and the checkpoint to resume from.
Every way a role can die in a run ends here (:meth:`FailureNaming.failure`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rlkit.distributed.runtime.actor_state import PING_TIMEOUT_S, describe_error, node_of
from rlkit.distributed.runtime.placement import ResourcePlan, cluster_nodes

if TYPE_CHECKING:
    from collections.abc import Callable

    from ray.actor import ActorHandle

#: The roles a run can replace (each restart with a fresh seed); every other role (learner,
#: servers, shards, queue) holds state the run cannot rebuild, so its failure ends the run.
RESTARTABLE = ("worker", "evaluator")


class RoleFailedError(RuntimeError):
    """A role the run cannot replace died or raised; the message names it (and its node when
    it is not the driver's) and the last checkpoint to resume from."""

    def __init__(self, message: str, role: str) -> None:
        super().__init__(message)
        self.role = role


class LearnerFailedError(RoleFailedError):
    """The learner (or a rank of a learner group) died or stopped; the message names the last
    checkpoint to resume from."""


class FailureNaming:
    """The supervisor's failure path; :class:`~rlkit.distributed.runtime.supervisor.Supervisor`
    provides the attributes below."""

    handles: dict[str, ActorHandle]
    plan: ResourcePlan | None
    last_checkpoint: Callable[[], Path | None]
    checkpoint_dir: str | Path | None

    def dead_roles(self) -> list[str]:
        """The unreplaceable roles whose ``ping`` fails (one busy past ``PING_TIMEOUT_S`` lives)."""
        import ray
        from ray.exceptions import RayError

        roles = [r for r in self.handles if not r.startswith(RESTARTABLE)]
        pings = {self.handles[r].ping.remote(): r for r in roles}
        ready, _ = ray.wait(list(pings), num_returns=len(pings), timeout=PING_TIMEOUT_S)
        dead = []
        for ref in ready:
            try:
                ray.get(ref)
            except RayError:
                dead.append(pings[ref])
        return sorted(dead, key=roles.index)

    def failure(self, error: BaseException, role: str, doing: str,
                dead: list[str] | None = None) -> RoleFailedError:
        """The error for a failed call to ``role``: it names the role that really failed
        (``role`` itself if it is dead or raised, else another that died first), its node, the
        roles lost with it (a node that died takes all of its actors), and the checkpoint.
        ``dead``: the roles already found dead (else they are pinged now)."""
        dead = self.dead_roles() if dead is None else dead
        culprit = role if role in dead or not dead else dead[0]
        node = node_of(self.handles[culprit]) if culprit in self.handles else None
        where = f" on {node}" if node else ""
        what = (f"the {culprit} actor died{where}; the {role} failed with it while {doing}"
                if culprit != role else f"the {role} actor failed{where} while {doing}")
        others = [r for r in dead if r not in (culprit, role)]
        others += [r for r in self.lost_with(culprit) if r not in (*others, role)]
        if others:
            what += f" (also lost: {', '.join(others)})"
        last = self.last_checkpoint()
        if last is not None:
            fix = (f"the last checkpoint is {last}. Fix: find the cause above, then call again "
                   f"with resume_from={str(last)!r}")
        elif self.checkpoint_dir is not None:
            fix = (f"no checkpoint had been written to {self.checkpoint_dir} yet (the first comes "
                   f"after checkpoint_every updates). Fix: find the cause above and run again")
        else:
            fix = "no checkpoint was written (pass checkpoint_dir=... to keep one)"
        cls = LearnerFailedError if culprit.split(" ")[0] == "learner" else RoleFailedError
        return cls(f"{what} ({describe_error(error)}); {fix}.", culprit)

    def lost_with(self, role: str) -> list[str]:
        """The other running roles the plan put on ``role``'s node, if Ray no longer lists that
        node alive: a node that dies takes every actor on it, workers included. (A node that
        died silently stays listed for about 15 s; its roles are then not named here.)"""
        slot = self.plan.slots.get(role) if self.plan is not None else None
        if slot is None or slot.node_id in {n.node_id for n in cluster_nodes()}:
            return []
        return [r for r, s in self.plan.slots.items()
                if s.node_id == slot.node_id and r != role and r in self.handles]
