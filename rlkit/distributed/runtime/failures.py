"""Naming a failure right: which role really failed (a worker's call fails when the server it
talks to died), its node, every role lost with that node, and the checkpoint to resume from.
Every way a role can die in a run ends here (:meth:`FailureNaming.failure`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlkit.distributed.runtime.actor_state import PING_TIMEOUT_S, describe_error, node_of
from rlkit.distributed.runtime.placement import ResourcePlan, cluster_nodes

if TYPE_CHECKING:
    from collections.abc import Callable

    from ray.actor import ActorHandle

#: The roles a run can replace (each restart with a fresh seed); every other role (learner,
#: servers, shards, queue) holds state the run cannot rebuild, so its failure ends the run.
RESTARTABLE = ("worker", "evaluator")


def failed_pings(ready: list[Any], pings: dict[Any, str]) -> list[str]:
    """The roles of the ``ready`` pings (``pings``: ref -> role) that raised a Ray error."""
    import ray
    from ray.exceptions import RayError

    dead = []
    for ref in ready:
        try:
            ray.get(ref)
        except RayError:
            dead.append(pings[ref])
    return dead


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
        """The unreplaceable roles whose ``ping`` fails (one busy past ``PING_TIMEOUT_S`` lives),
        then, if any failed, the restartable roles the plan put on their nodes whose ping failed
        too: a node that dies takes every actor on it, and one that died silently is still
        listed alive for about 15 s. All are pinged at once; the second group is waited for
        only within the same ``PING_TIMEOUT_S``, and only when an unreplaceable role is dead."""
        import ray

        roles = [r for r in self.handles if not r.startswith(RESTARTABLE)]
        beside = self.beside(roles)
        pings = {self.handles[r].ping.remote(): r for r in roles + beside}
        sent = time.perf_counter()
        servers = [ref for ref, r in pings.items() if r in roles]
        ready, _ = ray.wait(servers, num_returns=len(servers), timeout=PING_TIMEOUT_S)
        dead = failed_pings(ready, pings)
        if dead and beside:
            rest = [ref for ref, r in pings.items() if r in beside]
            left = max(0.0, PING_TIMEOUT_S - (time.perf_counter() - sent))
            ready, _ = ray.wait(rest, num_returns=len(rest), timeout=left)
            dead += failed_pings(ready, pings)
        return sorted(dead, key=(roles + beside).index)

    def beside(self, roles: list[str]) -> list[str]:
        """The running restartable roles the plan put on a node of one of ``roles``, other than
        the driver's node (which cannot be lost while the driver runs)."""
        if self.plan is None:
            return []
        driver = {n.node_id for n in self.plan.nodes if n.driver}
        nodes = {self.plan.slots[r].node_id for r in roles if r in self.plan.slots} - driver
        return [r for r, s in self.plan.slots.items()
                if r.startswith(RESTARTABLE) and s.node_id in nodes and r in self.handles]

    def failure(self, error: BaseException, role: str, doing: str,
                dead: list[str] | None = None) -> RoleFailedError:
        """The error for a failed call to ``role``: it names the role that really failed
        (``role`` itself if it is dead or raised, else another that died first), its node, the
        roles lost with it (a node that died takes all of its actors), and the checkpoint.
        ``dead``: the roles already found dead (:meth:`dead_roles`; else they are pinged now)."""
        dead = self.dead_roles() if dead is None else dead
        servers = [r for r in dead if not r.startswith(RESTARTABLE)]
        culprit = role if role in servers or not servers else servers[0]
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
        died silently stays listed for about 15 s: :meth:`dead_roles` names the roles there
        whose ping failed.)"""
        slot = self.plan.slots.get(role) if self.plan is not None else None
        if slot is None or slot.node_id in {n.node_id for n in cluster_nodes()}:
            return []
        return [r for r, s in self.plan.slots.items()
                if s.node_id == slot.node_id and r != role and r in self.handles]
