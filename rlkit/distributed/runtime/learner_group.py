"""A learner group: ``W`` learner ranks that train as one, each on its share of every batch.

Rank 0 opens a ``torch.distributed.TCPStore`` on a port of its node that the OS picks; every
rank joins a gloo process group through it (the rendezvous is passed explicitly, not through
``MASTER_ADDR``/``MASTER_PORT``). Gloo then connects the ranks directly, choosing its network
interface from the machine's host name unless ``GLOO_SOCKET_IFNAME`` names one: on machines with
several interfaces, set it on every node (e.g. through ``runtime_env={"env_vars": ...}``), and
let the nodes reach each other's ports. From then on each rank's learner calls
:func:`rlkit.core.gradients.average_gradients` between ``backward()`` and its clip, so the ranks
take the step one learner would take on the whole batch and keep identical weights; rank 0's
weights are the group's.

A group is all or nothing: a rank that dies leaves the others blocked in their next
all-reduce, so the driver treats the loss of any rank as the loss of the learner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

from rlkit.core.gradients import average_gradients
from rlkit.core.networks import module_weights
from rlkit.core.types import Weights
from rlkit.core.validation import fail


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks meet: rank 0's store at ``host:port``.

    Attributes:
        host: Rank 0's node address (reachable from every rank's node).
        port: The store's port on it.
        world_size: Ranks in the group.
        backend: ``"gloo"`` (CPU; any tensor) or ``"nccl"`` (every rank on a GPU).
        timeout_s: Longest wait for the other ranks, at the rendezvous and in a collective.
    """

    host: str
    port: int
    world_size: int
    backend: str = "gloo"
    timeout_s: float = 60.0


def open_store(host: str, world_size: int, timeout_s: float) -> Any:
    """Rank 0's ``TCPStore`` on ``host``, on a port the OS picks (read it from ``.port``):
    bound at once, so no other process can take the port in between."""
    import torch.distributed as dist

    return dist.TCPStore(host, 0, world_size, is_master=True,
                         timeout=timedelta(seconds=timeout_s), wait_for_workers=False)


def join_group(rank: int, rendezvous: Rendezvous, store: Any = None) -> None:
    """Join this process to the group as ``rank`` (rank 0 passes the store it opened)."""
    import torch.distributed as dist

    timeout = timedelta(seconds=rendezvous.timeout_s)
    if store is None:
        store = dist.TCPStore(rendezvous.host, rendezvous.port, rendezvous.world_size,
                              is_master=False, timeout=timeout)
    dist.init_process_group(rendezvous.backend, store=store, rank=rank,
                            world_size=rendezvous.world_size, timeout=timeout)


def leave_group() -> None:
    """Leave the process group, if this process is in one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class GroupMember:
    """What makes a learner role a rank of a group: the meeting point (rank 0) and joining.
    The role holds ``self.learner`` (with ``sync_gradients``) and ``self.rank``."""

    learner: Any
    rank: int = 0

    def meeting_point(self, world_size: int, timeout_s: float) -> tuple[str, int]:
        """Rank 0: open the store on this node; its address and port."""
        try:
            import ray

            host = ray.util.get_node_ip_address()
        except Exception:  # noqa: BLE001  (outside Ray: this machine)
            host = "127.0.0.1"
        self.store = open_store(host, world_size, timeout_s)
        return host, int(self.store.port)

    def join(self, rendezvous: Rendezvous) -> None:
        """Join the group; from now on every update averages the gradients over the ranks."""
        join_group(self.rank, rendezvous, getattr(self, "store", None) if self.rank == 0 else None)
        self.learner.sync_gradients = average_gradients

    def leave(self) -> None:
        leave_group()


class LearnerRank(GroupMember):
    """One rank of a learner group around any learner, as a plain class (``ray.remote`` it for
    an actor): the smallest role a group needs, used to check the group's arithmetic.

    Args:
        make_learner: Builds this rank's learner; it has ``update(batch)``,
            ``sync_gradients`` and a network attribute.
        rank: This rank's index.
        network: The learner's attribute holding the network whose weights are the group's.
        seed: Torch's seed before ``make_learner()``: the same on every rank, so every rank
            starts from the same weights.
        threads: Torch threads (1: one core per rank, as rlkit's learner actors use).
    """

    def __init__(self, make_learner: Callable[[], Any], rank: int, network: str,
                 seed: int, threads: int = 1) -> None:
        import torch

        torch.set_num_threads(threads)
        torch.manual_seed(seed)
        self.learner = make_learner()
        self.rank, self.network = rank, network

    def ping(self) -> int:
        return self.rank

    def update(self, batches: Sequence[Any]) -> int:
        """One update per batch (this rank's share of each); the learner's update count."""
        for batch in batches:
            self.learner.update(batch)
        return int(self.learner.updates)

    def weights(self, network: str | None = None) -> Weights:
        """The weights of the learner's ``network`` attribute (default: the group's): a
        module's, or one tensor's (SAC's ``log_alpha``) under its own name."""
        value = getattr(self.learner, network or self.network)
        if isinstance(value, torch.Tensor):
            return {network or self.network: value.detach().cpu().numpy()}
        return module_weights(value)


def check_group_share(num_learners: int, name: str, size: int, takes: str = "takes") -> None:
    """Refuse a learner group whose ranks cannot each take an equal share of every batch: the
    config's ``name`` (its value ``size``) must be a multiple of ``num_learners``."""
    if size % num_learners:
        fail("num_learners", num_learners, f"must divide {name}={size}: each rank {takes} an "
             f"equal share of every batch", f"use a divisor of {name}")


def form_group(ranks: Sequence[Any], backend: str = "gloo", timeout_s: float = 60.0) -> None:
    """Rendezvous Ray actors of :class:`LearnerRank` (rank ``r`` at index ``r``): rank 0 picks
    the meeting point, then all join at once (each blocks until all have)."""
    import ray

    host, port = ray.get(ranks[0].meeting_point.remote(len(ranks), timeout_s), timeout=timeout_s)
    meeting = Rendezvous(host, port, len(ranks), backend, timeout_s)
    ray.get([r.join.remote(meeting) for r in ranks], timeout=timeout_s + 10)


def restart_group(supervisor: Any, roles: Sequence[str], wait_s: float,
                  checkpoint: Any = None, error: BaseException | None = None) -> None:
    """A gang restart: kill every rank in ``roles``, give each rank whose node is gone a node
    with room (waiting up to ``wait_s`` for one, as for a replacement machine joining), and
    start them all again (``checkpoint``: named in the error). The caller then forms the group
    and loads the checkpoint. ``error``: the lost rank's (a :class:`RoleFailedError`); if its
    node does not answer, it counts as gone even while Ray still lists it (a machine that
    died silently).

    Raises:
        RoleFailedError: if no node has room for a rank within ``wait_s``.
    """
    import time

    import ray

    from rlkit.distributed.runtime.actor_state import silently_gone
    from rlkit.distributed.runtime.placement import cluster_nodes
    from rlkit.distributed.runtime.supervisor import RoleFailedError

    plan, lost = supervisor.plan, getattr(error, "role", None)
    lost_with = (f"; {lost} was lost with {plan.node(lost)}"
                 if plan is not None and lost in plan.slots else "")
    gone = (plan.slots[lost].node_id  # a node that does not answer counts as gone
            if plan is not None and lost in plan.slots and silently_gone(supervisor[lost])
            else "")
    for role in roles:
        ray.kill(supervisor[role], no_restart=True)
    placed = [r for r in supervisor.handles if r not in roles]
    deadline = time.monotonic() + wait_s

    def nodes() -> list[Any]:
        return [n for n in cluster_nodes() if n.node_id != gone]

    alive = {n.node_id for n in nodes()}
    for role in sorted(roles, key=lambda r: plan is None or plan.slots[r].node_id not in alive):
        while plan is not None and (moved := plan.moved(
                role, nodes(), placed, at_least=plan.slots[role].cpus)) is None:
            if time.monotonic() > deadline:
                sizes = ", ".join(f"{n.cpus:g}" for n in cluster_nodes())
                raise RoleFailedError(
                    f"the {role} cannot be restarted: no node had room for its "
                    f"{plan.slots[role].cpus:g} CPU within {wait_s:g} s (timeout_s; nodes of "
                    f"{sizes} CPUs{lost_with}). Fix: add a node, then call again with "
                    f"resume_from={str(checkpoint)!r}.",
                    role)
            time.sleep(0.5)
        if plan is not None:
            supervisor.plan = plan = moved
        placed.append(role)
        supervisor.relaunch(role)



def group_updates_per_second(make_learner: Callable[[], Any], network: str,
                             batches: Sequence[Any], world_size: int, cpus: float = 1.0,
                             seed: int = 0, repeats: int = 1) -> float:
    """Updates per second of a group of ``world_size`` :class:`LearnerRank` actors, each rank
    on its ``1/world_size`` share of every batch (rows ``r::world_size``; the first batch is a
    warm-up, not timed): the learner's own speed, with no environment running beside it.

    Args:
        make_learner, network, seed: As :class:`LearnerRank`.
        batches: Whole batches (NamedTuples of arrays with the batch first).
        world_size: Ranks.
        cpus: Each rank's CPU request.
        repeats: Timed passes over ``batches``; the fastest counts. A process starting beside
            the ranks (Ray refills its pool of idle workers after actors start, seconds of CPU
            each) can halve one pass on 2 cores; the best of a few passes measures the group.
    """
    import time

    import ray

    actor = ray.remote(LearnerRank).options(num_cpus=cpus)
    ranks = [actor.remote(make_learner, r, network, seed) for r in range(world_size)]
    try:
        if world_size > 1:
            form_group(ranks)
        shares = [[type(b)(*(f[r::world_size] for f in b)) for b in batches]
                  for r in range(world_size)]
        ray.get([rank.update.remote(share[:1]) for rank, share in zip(ranks, shares)])
        best = 0.0
        for _ in range(repeats):
            begin = time.perf_counter()
            ray.get([rank.update.remote(share[1:]) for rank, share in zip(ranks, shares)])
            best = max(best, (len(batches) - 1) / (time.perf_counter() - begin))
        return best
    finally:
        for rank in ranks:
            ray.kill(rank)
