"""The parameter server, and the two ways a role talks to it: in-process and over Ray.

The roles (:mod:`rlkit.distributed.off_policy.roles`) never ask whether they run under Ray. They are
handed a *weights channel*: :class:`LocalChannel` calls a :class:`ParameterServer` object
directly (tests, one process), :class:`RayChannel` talks to a server actor. Both have the same
three methods, so a role has one code path.

Kept free of torch imports on purpose: the server's actor process then starts in a fraction of
a second instead of paying torch's ~1.5 s import.
"""

from __future__ import annotations

from typing import Any, Protocol

from rlkit.core.types import Weights
from rlkit.distributed.runtime.cluster import inline_limit

#: ``(version, weights)`` or ``None`` when the server holds nothing newer.
Newer = tuple[int, Weights] | None


def inline_weights_bytes() -> int:
    """Weights up to this size travel by value inside the calls; larger ones by reference.

    Ray sends an argument or a reply smaller than its inline limit inside the call message
    itself; a bigger one goes through the shared-memory object store. The limit is 100 KiB by
    default and 1 MiB in a cluster started by
    :func:`rlkit.distributed.runtime.cluster.init_ray`; 10% of it is left for the
    serialisation's own bytes.
    """
    return int(0.9 * inline_limit())


def weights_nbytes(weights: Weights) -> int:
    """Bytes of the arrays in ``weights``."""
    return sum(int(getattr(v, "nbytes", 0)) for v in weights.values())


def pack_weights(weights: Weights) -> Any:
    """What :class:`RayChannel` sends the server: small weights by value (one message, no
    object-store round trip for anyone), large ones as ``[ObjectRef]`` (stored once with
    ``ray.put``; every worker fetches the same object, the server never copies the arrays)."""
    import ray

    if weights_nbytes(weights) <= inline_weights_bytes():
        return weights
    return [ray.put(weights)]


def unpack_weights(payload: Any, timeout_s: float | None = None) -> Weights:
    """The weights in a payload made by :func:`pack_weights`."""
    import ray

    return ray.get(payload[0], timeout=timeout_s) if isinstance(payload, list) else payload


class ParameterServer:
    """Holds the newest policy weights under an increasing version number.

    The payload is opaque to the server. Under Ray it is what :func:`pack_weights` makes:
    small weights by value, large ones as ``[ObjectRef]``: the learner stores those once with
    ``ray.put`` and sends the reference inside a list, because Ray resolves a reference passed
    as a bare argument but passes one nested in a list on as a reference. The server then never
    copies the arrays, and every worker fetches the same object.
    """

    def __init__(self) -> None:
        self.version = 0
        self.payload: Any = None

    def ping(self) -> bool:
        return True

    def publish(self, payload: Any) -> int:
        """Store ``payload`` as the next version; return the version number."""
        self.version += 1
        self.payload = payload
        return self.version

    def get_version(self) -> int:
        return self.version

    def get_if_newer(self, version: int) -> tuple[int, Any] | None:
        """``(version, payload)`` if the server holds a version newer than ``version``."""
        return (self.version, self.payload) if self.version > version else None


class WeightsChannel(Protocol):
    """What a role needs of the parameter server."""

    def publish(self, weights: Weights) -> None:
        """Hand over a new version (may return before the server has it; see ``flush``)."""

    def flush(self) -> None:
        """Return once the server holds every version published so far."""

    def poll(self, version: int) -> Newer:
        """The newest ``(version, weights)`` if newer than ``version``; may answer from a
        question asked earlier (see :class:`RayChannel`)."""


class LocalChannel:
    """A channel to a :class:`ParameterServer` object in this process: direct calls."""

    def __init__(self, server: ParameterServer) -> None:
        self.server = server

    def publish(self, weights: Weights) -> None:
        self.server.publish(weights)

    def flush(self) -> None:
        pass

    def poll(self, version: int) -> Newer:
        return self.server.get_if_newer(version)


class RayChannel:
    """A channel to a :class:`ParameterServer` actor.

    ``publish`` sends the server the weights (by value when small, else stored once with
    ``ray.put`` and sent as a reference: see :func:`pack_weights`) without waiting for its
    answer. ``poll`` asks "anything newer than my version?" one call
    *ahead*: it returns the answer to the question sent at the previous poll if that answer is
    back (and sends the next question), so the ~1 ms round trip overlaps the caller's work.
    The first poll waits for its answer, so a worker never acts on untrained initial weights
    once a version exists.

    Args:
        server: The ``ray.remote(ParameterServer)`` actor handle.
        timeout_s: Longest wait for the server before raising ``GetTimeoutError``.
    """

    def __init__(self, server: Any, timeout_s: float = 120.0) -> None:
        self.server = server
        self.timeout_s = timeout_s
        self.pending_publish: Any = None
        self.pending_poll: Any = None

    def __getstate__(self) -> dict[str, Any]:  # a copy sent to another actor starts afresh
        return {"server": self.server, "timeout_s": self.timeout_s,
                "pending_publish": None, "pending_poll": None}

    def publish(self, weights: Weights) -> None:
        self.pending_publish = self.server.publish.remote(pack_weights(weights))

    def flush(self) -> None:
        import ray

        if self.pending_publish is not None:
            ray.get(self.pending_publish, timeout=self.timeout_s)
            self.pending_publish = None

    def poll(self, version: int) -> Newer:
        import ray

        pending, self.pending_poll = self.pending_poll, None
        if pending is None:  # first poll: ask and wait for the answer
            pending = self.server.get_if_newer.remote(version)
        elif not ray.wait([pending], timeout=0)[0]:  # not back yet: keep working, ask later
            self.pending_poll = pending
            return None
        answer = ray.get(pending, timeout=self.timeout_s)
        known = version if answer is None else answer[0]
        self.pending_poll = self.server.get_if_newer.remote(known)  # the answer for next time
        if answer is None:
            return None
        return known, unpack_weights(answer[1], self.timeout_s)
