"""The parameter server: the newest policy weights under a version number.

Kept free of torch imports on purpose: its Ray actor process then starts in a fraction of a
second instead of paying torch's ~1.5 s import.
"""

from __future__ import annotations

from typing import Any


class ParameterServer:
    """Holds the newest policy weights under an increasing version number.

    Under Ray the learner stores the weights in the object store once per version
    (``ray.put``) and hands the server the reference wrapped in a list (a bare reference
    passed to an actor method would be fetched; one inside a list is kept as a reference), so
    the server never copies the arrays and every worker fetches the same stored object.
    """

    def __init__(self) -> None:
        self.version = 0
        self.payload: Any = None

    def publish(self, payload: Any) -> int:
        """Store ``payload`` (weights, or ``[ObjectRef]``) as the next version; return it."""
        self.version += 1
        self.payload = payload
        return self.version

    def get_version(self) -> int:
        return self.version

    def get_if_newer(self, version: int) -> tuple[int, Any] | None:
        """``(version, payload)`` if the server holds a version newer than ``version``."""
        return (self.version, self.payload) if self.version > version else None
