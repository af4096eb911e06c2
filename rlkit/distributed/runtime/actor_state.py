"""What Ray knows about an actor, read without a dashboard: its state (pending, alive, dead),
its node, why it failed; and waiting until killed actors are gone."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rlkit.distributed.runtime.ray_private import actor_record

if TYPE_CHECKING:
    from ray.actor import ActorHandle


#: The longest a driver waits, after killing its actors, for their processes to be gone.
EXIT_TIMEOUT_S = 10.0
#: How long a ping that asks whether an actor is there waits: a dead actor's fails at once, a
#: busy one (a learner rank blocked in an all-reduce) counts as alive after this long. It is
#: most of the time from a failure to the error that names the role.
PING_TIMEOUT_S = 2.0


def wait_gone(handles: list[ActorHandle], timeout: float) -> bool:
    """Wait until Ray reports every actor in ``handles`` dead (its process gone), at most
    ``timeout`` seconds, so the next run starts on a quiet machine; whether all were."""
    deadline, left = time.monotonic() + timeout, list(handles)
    while left and time.monotonic() < deadline:
        left = [h for h in left if actor_state(h).get("State", "DEAD") != "DEAD"]
        if left:
            time.sleep(0.05)
    return not left


def describe_error(error: BaseException) -> str:
    """``"Type: message"`` of the original exception behind a Ray error, on one line and whole:
    the cause's first line, or for an actor that died, Ray's reason (its last line)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    ours = not type(error).__module__.startswith("ray.")  # Ray's own put the reason last
    lines = str(error).strip().splitlines()
    lines = lines[:1] if ours else lines[-1:]
    return f"{type(error).__name__}: {lines[0].strip() if lines else ''}"


def silently_gone(handle: ActorHandle) -> bool:
    """Whether ``handle``'s actor is listed alive by Ray but its node no longer answers: a
    machine that died silently (power, a kernel panic) stays alive in Ray's node table for
    about 15 s more, and a replacement pinned to it would never start. Ask before killing the
    actor."""
    import ray
    from ray.exceptions import ActorUnavailableError, RayError

    if actor_state(handle).get("State") != "ALIVE":
        return False
    try:
        ray.get(handle.ping.remote(), timeout=PING_TIMEOUT_S)
    except ActorUnavailableError:
        return True
    except (RayError, TimeoutError):  # busy, or dead in Ray's eyes too
        pass
    return False


def node_of(handle: ActorHandle) -> str | None:
    """``"node 1a2b3c4d (10.0.0.7)"`` where ``handle``'s actor runs (or ran), if not this
    process's node; ``None`` on the driver's node or if Ray cannot say."""
    import ray

    address = actor_state(handle).get("Address") or {}
    node_id = address.get("NodeID") or ""
    if not node_id.strip("0") or node_id == ray.get_runtime_context().get_node_id():
        return None
    # a dead actor's record may keep its node but not the address: the node table has it
    host = address.get("IPAddress") or node_address(node_id) or "address unknown"
    return f"node {node_id[:8]} ({host})"


def node_address(node_id: str) -> str:
    """The address Ray's node table gives ``node_id`` (dead nodes included); ``""`` if none."""
    import ray

    try:
        nodes = ray.nodes()
    except Exception:  # noqa: BLE001 - only a label: never let it hide the failure being named
        return ""
    return next((n.get("NodeManagerAddress") or "" for n in nodes if n.get("NodeID") == node_id),
                "")


def actor_state(handle: ActorHandle) -> dict:
    """Ray's record of ``handle``'s actor (``State``, ``Address``, ...); ``{}`` if unknown."""
    return actor_record(handle)


def nodes_of(handles: dict[str, ActorHandle]) -> dict[str, str]:
    """``{name: node id}`` of each actor in ``handles`` that Ray has placed."""
    nodes = {name: (actor_state(h).get("Address") or {}).get("NodeID", "")
             for name, h in handles.items()}
    return {name: node for name, node in nodes.items() if node}

