"""Where each actor of a run goes: a plan per node, made before any actor starts.

A cluster is a set of nodes, each with its own CPUs (and GPUs). A request fits only if one node
has room for it: three 1-CPU nodes cannot host an actor that asks for 1.5 CPUs, although the
cluster has 3. :func:`plan_resources` therefore places every CPU role on a node, sizes it to
what that node has left, and refuses a plan that cannot be placed, naming the node sizes and a
count that fits. Each actor is then started pinned to its node
(:meth:`ResourcePlan.options`); the roles that ask for no CPU (parameter server, queue,
evaluator) are pinned to the driver's node, so a worker node that dies takes only
workers with it. When a node is lost, :meth:`ResourcePlan.moved` finds the replacement a node
with room, or says there is none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rlkit.core.validation import COUNT, check_value, number_rule

#: The smallest CPU share a rollout worker may get; below it a worker would barely run.
MIN_WORKER_CPUS = 0.05


@dataclass(frozen=True)
class Node:
    """One alive node of the cluster, as :func:`cluster_nodes` reads it from Ray."""

    node_id: str
    address: str
    cpus: float
    gpus: float = 0.0
    driver: bool = False  # the node this process (the driver) is attached to

    def __str__(self) -> str:
        return f"node {self.node_id[:8]} ({self.address})"


def cluster_nodes() -> tuple[Node, ...]:
    """The cluster's alive nodes, the driver's first, then by CPUs (most first)."""
    import ray

    here = ray.get_runtime_context().get_node_id()
    nodes = [Node(n["NodeID"], n["NodeManagerAddress"], float(n["Resources"].get("CPU", 0.0)),
                  float(n["Resources"].get("GPU", 0.0)), n["NodeID"] == here)
             for n in ray.nodes() if n["Alive"]]
    return tuple(sorted(nodes, key=lambda n: (not n.driver, -n.cpus)))


@dataclass(frozen=True)
class Slot:
    """What one role asks for, and the node it is pinned to."""

    node_id: str
    cpus: float
    gpus: float = 0.0


def available_ram() -> int:
    """This machine's available RAM in bytes (psutil, pinned in requirements.txt)."""
    import psutil

    return int(psutil.virtual_memory().available)


def free_memory_on(node: Node, timeout: float = 60.0) -> int | None:
    """Bytes of RAM available on ``node`` (a tiny task pinned there asks psutil); ``None`` on
    the driver's node (measure it here) or if the node cannot say."""
    if node.driver:
        return None
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(available_ram).options(
        num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False))
    try:
        return ray.get(probe.remote(), timeout=timeout)
    except Exception:  # noqa: BLE001  (a node that cannot say: the limit still applies)
        return None


def floor4(cpus: float) -> float:
    """Ray counts resources in steps of 1e-4: round *down*, so shares never overbook a node
    (rounding 1/6 up to 0.1667 would overbook 2 CPUs by 0.0002)."""
    return math.floor(cpus * 1e4 + 1e-9) / 1e4


@dataclass(frozen=True)
class ResourcePlan:
    """Every CPU role's node and share. CPU fractions are scheduling labels: a 0.5-CPU actor
    still runs in its own process, and Ray starts it only while the requests on its node add up
    to at most the node's CPUs, so a plan that fits never leaves an actor pending.

    Attributes:
        nodes: The nodes planned on (the driver's first).
        slots: ``{role: Slot}`` for the learners, workers and shards.
        learner_roles: The learner ranks' role names (``("learner",)`` for one learner).
        whole_learner_workers: The most workers that fit beside the learner ranks on whole
            CPUs (a plan for more gives each rank at most half its node).
        learner_halved: The learner ranks gave up CPUs (to at most half their node) so that
            every worker gets its minimum share.
    """

    nodes: tuple[Node, ...]
    slots: dict[str, Slot] = field(default_factory=dict)
    learner_roles: tuple[str, ...] = ("learner",)
    whole_learner_workers: int | None = None
    learner_halved: bool = False

    @property
    def learner_cpus(self) -> float:
        return self.slots[self.learner_roles[0]].cpus

    @property
    def learner_gpus(self) -> float:
        return self.slots[self.learner_roles[0]].gpus

    @property
    def worker_cpus(self) -> float:
        """The smallest share a worker (or shard) gets."""
        return min(s.cpus for r, s in self.slots.items() if r not in self.learner_roles)

    @property
    def idle_cpus(self) -> float:
        """CPUs of the plan's nodes that no role asks for."""
        return floor4(sum(n.cpus for n in self.nodes) - sum(s.cpus for s in self.slots.values()))

    def node(self, role: str) -> Node:
        """The node ``role`` is planned on (the driver's for a role without a slot)."""
        node_id = self.slots[role].node_id if role in self.slots else self.nodes[0].node_id
        return next(n for n in self.nodes if n.node_id == node_id)

    def options(self, role: str, **extra: Any) -> dict[str, Any]:
        """``.options(...)`` for ``role``'s actor: its share, pinned to its node; a role
        without a slot asks for no CPU and is pinned to the driver's node, which the run cannot
        outlive anyway. (Not ``soft``: measured on Ray 2.60, a soft preference placed 1 of 4
        such actors on another node although the driver's had room.)"""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        slot = self.slots.get(role)
        if slot is None:
            return {"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(
                self.nodes[0].node_id, soft=False), **extra}
        return {"num_cpus": slot.cpus, "num_gpus": slot.gpus, **extra,
                "scheduling_strategy": NodeAffinitySchedulingStrategy(slot.node_id, soft=False)}

    def moved(self, role: str, alive: Sequence[Node], live_roles: Sequence[str],
              at_least: float = MIN_WORKER_CPUS) -> ResourcePlan | None:
        """This plan with ``role`` re-placed for a replacement: on its node if it is alive,
        else on the alive node with the most CPUs left by ``live_roles`` (and its GPUs),
        asking for what is left there (at most its old share); ``None`` if no node has
        ``at_least`` CPUs left (a learner rank asks for its whole old share)."""
        old = self.slots[role]
        if any(n.node_id == old.node_id for n in alive):
            return self
        used: dict[str, float] = {}
        for r in live_roles:
            if r in self.slots and r != role:
                used[self.slots[r].node_id] = used.get(self.slots[r].node_id, 0.0) \
                    + self.slots[r].cpus
        room = {n.node_id: floor4(n.cpus - used.get(n.node_id, 0.0)) for n in alive
                if n.gpus >= old.gpus}
        best = max(room, key=room.get, default=None)  # type: ignore[arg-type]
        if best is None or room[best] < at_least:
            return None
        slot = Slot(best, min(old.cpus, room[best]), old.gpus)
        nodes = tuple(alive) + tuple(n for n in self.nodes if n not in alive)
        return replace(self, nodes=nodes, slots={**self.slots, role: slot})

    def rows(self) -> list[tuple[str, str, float]]:
        """``(role, node, CPUs)`` per planned role, for a table."""
        return [(role, str(self.node(role)), slot.cpus) for role, slot in self.slots.items()]

    def __str__(self) -> str:
        learner, shares = self.learner_roles[0], sorted({s.cpus for r, s in self.slots.items()
                                                         if r not in self.learner_roles})
        others = len(self.slots) - len(self.learner_roles)
        return (f"{len(self.learner_roles)} x learner {self.slots[learner].cpus:g} CPU"
                + (f" {self.slots[learner].gpus:g} GPU" if self.slots[learner].gpus else "")
                + f", {others} workers/shards at {'/'.join(f'{c:g}' for c in shares)} CPU"
                + f" on {len(self.nodes)} node{'s' * (len(self.nodes) > 1)}")


def plan_resources(num_workers: int, cluster: float | Sequence[Node],
                   learner_gpus: float | None = 0.0, cluster_gpus: float = 0.0, shards: int = 0,
                   learners: int = 1, learner_role: str = "learner") -> ResourcePlan:
    """Place the learner(s), the workers and the shards on the cluster's nodes.

    Each learner rank gets 1 CPU on the node with the most CPUs left (the driver's first on a
    tie), or at most half its node where a whole CPU would leave the others no room (for more
    workers than ``ResourcePlan.whole_learner_workers``, those that fit at ``MIN_WORKER_CPUS``
    each beside whole learners; the drivers log an event when it happens); the shards share its
    node (``learner`` rank 0's: they serve it); the workers fill the nodes' remaining CPUs
    evenly, at most 1 CPU each. On one 2-CPU node: learner 1, two workers 0.5 each; on three
    1-CPU nodes and 3 workers: learner 1 on the first, workers 1 and 0.5 + 0.5 on the others.

    Args:
        num_workers: Rollout workers.
        cluster: The nodes (:func:`cluster_nodes`), or a CPU count for one node.
        learner_gpus: GPUs per learner rank; ``None``: 1 if a node has one, else 0.
        cluster_gpus: With a CPU count for ``cluster``: that node's GPUs.
        shards: Actors sized as workers on rank 0's node (Ape-X's replay shards).
        learners: Learner ranks (a learner group).
        learner_role: The learner's role name (``"gradient server"`` for A3C); ranks of a
            group are named ``"<learner_role> 0"``, ``"<learner_role> 1"``, ...

    Raises:
        ValueError: if a count is not a positive int, or the plan cannot be placed (too many
            workers, a GPU no node has); the message names the node sizes and a count that fits.
    """
    check_value("num_workers", num_workers, COUNT)
    check_value("learners", learners, COUNT)
    check_value("learner_gpus", learner_gpus, number_rule(at_least=0, optional=True, example=1))
    nodes = (tuple(cluster) if not isinstance(cluster, (int, float)) else
             (Node("local", "this machine", float(cluster), float(cluster_gpus), True),))
    if learner_gpus is None:
        learner_gpus = 1.0 if any(n.gpus >= 1 for n in nodes) else 0.0
    roles = (learner_role,) if learners == 1 else tuple(f"{learner_role} {r}"
                                                        for r in range(learners))
    free = {n.node_id: n.cpus for n in nodes}
    gpus_free = {n.node_id: n.gpus for n in nodes}
    slots: dict[str, Slot] = {}
    for role in roles:
        fits = [n for n in nodes if gpus_free[n.node_id] >= learner_gpus and free[n.node_id] > 0]
        if not fits:
            sizes = ", ".join(f"{n.cpus:g} CPU/{n.gpus:g} GPU" for n in nodes)
            if learner_gpus and not any(gpus_free[n.node_id] >= learner_gpus for n in nodes):
                group = f" for each of {learners} learners" if learners > 1 else ""
                raise ValueError(f"learner_gpus={learner_gpus:g}{group} but no node has that "
                                 f"many GPUs free (nodes: {sizes}). Fix: use learner_gpus=0 "
                                 f"(CPU) or None, fewer learners, or nodes with GPUs.")
            raise ValueError(f"learners={learners} cannot be placed: {role} finds no node with a "
                             f"CPU left (nodes: {sizes}). Fix: use at most {roles.index(role)} "
                             f"learners, or a bigger cluster.")
        node = max(fits, key=lambda n: free[n.node_id])  # max() keeps the first on a tie
        slots[role] = Slot(node.node_id, min(1.0, free[node.node_id]), float(learner_gpus))
        free[node.node_id] -= slots[role].cpus
        gpus_free[node.node_id] -= learner_gpus
    home = slots[roles[0]].node_id
    # the most workers that fit beside learners on whole CPUs; past it, the learners shrink
    whole = sum(int(floor4(free[k]) / MIN_WORKER_CPUS + 1e-9) for k in free) - shards
    halved = False
    if sum(free.values()) < MIN_WORKER_CPUS * (num_workers + shards) or (
            shards and free[home] < MIN_WORKER_CPUS * shards):
        for role in roles:  # the learners leave half their node to the others
            node_id = slots[role].node_id
            ranks_here = sum(s.node_id == node_id for r, s in slots.items() if r in roles)
            half = next(n for n in nodes if n.node_id == node_id).cpus / 2 / ranks_here
            halved = halved or floor4(min(slots[role].cpus, half)) < slots[role].cpus
            free[node_id] += slots[role].cpus - floor4(min(slots[role].cpus, half))
            slots[role] = replace(slots[role], cpus=floor4(min(slots[role].cpus, half)))
    count = {n.node_id: 0 for n in nodes}
    count[home] = shards
    placed: list[str] = []
    for _ in range(num_workers):  # each worker where its share would be largest
        node_id = max(count, key=lambda k: min(1.0, free[k] / (count[k] + 1)))
        count[node_id] += 1
        placed.append(node_id)
    share = {k: floor4(min(1.0, free[k] / count[k])) for k in count if count[k]}
    if min(share.values(), default=1.0) < MIN_WORKER_CPUS:
        besides = f" beside {shards} shards" if shards else ""
        sizes = ", ".join(f"{n.cpus:g}" for n in nodes)
        fits_count = sum(int(floor4(free[k]) / MIN_WORKER_CPUS + 1e-9) for k in free) - shards
        raise ValueError(
            f"num_workers={num_workers}{besides} is too many for a cluster of "
            f"{len(nodes)} node{'s' * (len(nodes) > 1)} of {sizes} CPUs (beside the learner, "
            f"a worker would get {min(share.values()):.3f} CPU, below {MIN_WORKER_CPUS}). "
            f"Fix: use at most {max(fits_count, 0)} workers{besides}"
            + (f" (at most {max(whole, 0)} keep the learner on a whole CPU; more put it on half"
               f" its node)" if whole < fits_count else "") + ", or a bigger cluster.")
    for k in range(shards):
        slots[f"shard {k}"] = Slot(home, share[home])
    for i, node_id in enumerate(placed):
        slots[f"worker {i}"] = Slot(node_id, share[node_id])
    return ResourcePlan(nodes, slots, roles, max(whole, 0), halved)


def workers_to_fill(cluster: Sequence[Node], learners: int = 1, shards: int = 0) -> int:
    """The number of workers (at least 1) that fills ``cluster`` (:func:`cluster_nodes`) with
    a whole CPU each, beside ``learners`` learner ranks (1 CPU each) and ``shards``.

    The drivers' ``num_workers`` default does not grow with the cluster on purpose: the number
    of workers changes what a run learns (Ape-X's exploration ladder, IMPALA's policy lag,
    A3C's staleness), so the same call gives the same run wherever it runs. To use a bigger
    cluster, ask for it: ``DQNConfig(num_workers=workers_to_fill(cluster_nodes()))``.
    """
    free = sorted((n.cpus for n in cluster), reverse=True)
    for _ in range(learners):  # each rank takes a CPU of the node with the most left
        free[0] -= min(1.0, free[0])
        free.sort(reverse=True)
    return max(1, sum(int(c + 1e-9) for c in free) - shards)
