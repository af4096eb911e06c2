"""Losing a machine on purpose: remove the node that runs a role, mid-run (demos and tests).

``kill_at`` kills one actor; a machine that dies takes every actor on it, its object store and
its raylet. On a cluster of several raylets on one machine (``ray.cluster_utils.Cluster``),
:func:`lose_node_at` does exactly that, at a chosen env step of the run: the run then meets the
loss as a real one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rlkit.distributed.runtime import supervisor as supervision
from rlkit.distributed.runtime.placement import cluster_nodes


@dataclass
class NodeLoss:
    """What :func:`lose_node_at` did: the node removed (``None`` until then), when
    (``time.perf_counter()``) and the node that joined in its place, if any."""

    node_id: str | None = None
    at_seconds: float = 0.0
    seconds: float = 0.0  # the removal (and the replacement's start) took
    #: When the driver got control back: after the replacement joined, which this simulation
    #: starts in the driver's thread (a real cluster's autoscaler adds it on its own).
    driver_back_at: float = 0.0
    at_env_steps: int = 0
    replacement: Any = None


def node_processes(node: Any) -> list[Any]:
    """The processes a ``Cluster`` node started (its raylet's children: the actors' workers).
    Removing the node stops its raylet, but on one machine a worker blocked in C++ (a rank
    waiting in an all-reduce) outlives it until its own timeout; a real machine's death takes
    it too, so :func:`node_loss_hook` kills them."""
    try:
        import psutil

        raylet = node.all_processes["raylet"][0].process.pid
        return psutil.Process(raylet).children(recursive=True)
    except Exception:  # noqa: BLE001  (a private structure: cleaning up is a courtesy)
        return []


def remove_node(cluster: Any, node: Any, silent: bool = False) -> None:
    """Remove ``node`` of ``cluster`` with every process it started; ``silent``: SIGKILL them
    all, as a machine that loses power (see :func:`lose_node_at`)."""
    workers = node_processes(node)
    if silent:  # SIGKILL, workers first: the raylet says no goodbye to the GCS
        for proc in workers:
            with contextlib.suppress(Exception):
                proc.kill()
    cluster.remove_node(node, allow_graceful=not silent)
    for proc in workers:  # the machine is gone: nothing of it runs on (see node_processes)
        with contextlib.suppress(Exception):
            proc.kill()


def node_loss_hook(cluster: Any, role: str, env_steps: int, replace: bool = False,
                   silent: bool = False) -> tuple[Callable[[Any, int], None], NodeLoss]:
    """A fault hook (for :data:`~rlkit.distributed.runtime.supervisor.FAULT_HOOKS`) that, once
    a run has counted ``env_steps``, removes the node of ``cluster`` running ``role``'s actor;
    once. See :func:`lose_node_at` for the arguments. Returns the hook and its record."""
    loss = NodeLoss()

    def hook(sup: Any, steps: int) -> None:
        if loss.node_id is not None or steps < env_steps or role not in sup.handles:
            return
        node_id = sup.where().get(role)
        node = next((n for n in cluster.worker_nodes if n.node_id == node_id), None)
        if node is None:  # the head (it cannot be removed), or not placed yet
            return
        cpus = next((n.cpus for n in cluster_nodes() if n.node_id == node_id), 1.0)
        begin = time.perf_counter()
        remove_node(cluster, node, silent)
        loss.node_id, loss.at_seconds, loss.at_env_steps = node_id, time.perf_counter(), steps
        if replace:
            loss.replacement = cluster.add_node(num_cpus=cpus)
        loss.driver_back_at = time.perf_counter()
        loss.seconds = loss.driver_back_at - begin

    return hook, loss


@contextmanager
def lose_node_at(cluster: Any, role: str, env_steps: int, replace: bool = False,
                 silent: bool = False) -> Iterator[NodeLoss]:
    """Within the block, once a run has counted ``env_steps``, remove the node of ``cluster``
    that runs ``role``'s actor (all its actors die with it); once per block.

    Args:
        cluster: A ``ray.cluster_utils.Cluster``.
        role: The role whose node goes, e.g. ``"worker 0"`` or ``"learner 0"``.
        env_steps: When.
        replace: A new node with the lost one's CPUs joins right after (as a cluster's
            autoscaler would bring one).
        silent: Kill the node's processes with SIGKILL, as a machine that loses power: Ray
            then lists the node as alive until its health checks time out (about 15 s),
            while its actors already fail to answer. Otherwise the raylet is stopped with
            SIGTERM and tells the cluster it is going.

    Yields:
        A :class:`NodeLoss`, filled in when the node goes.
    """
    hook, loss = node_loss_hook(cluster, role, env_steps, replace, silent)
    supervision.FAULT_HOOKS.append(hook)
    try:
        yield loss
    finally:
        supervision.FAULT_HOOKS.remove(hook)
