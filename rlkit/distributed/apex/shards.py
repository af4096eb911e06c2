"""The replay shards of Ape-X, as plain classes first and Ray actors second.

:class:`ReplayShard` is one prioritized replay (:class:`rlkit.replay.prioritized.
PrioritizedReplay`) behind actor methods; ``K`` shards hold the data between them. The workers
and the learner reach them through a :class:`ShardClient`: :class:`LocalShards` calls plain
objects (one process, tests), :class:`RayShards` calls actors. The roles' code is the same
either way.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np

from rlkit.core.spaces import ObsSpec
from rlkit.core.types import NStepBatch
from rlkit.replay.prioritized import PrioritizedReplay, PrioritizedSample

__all__ = ["LocalShards", "RayShards", "ReplayShard", "ShardClient", "ShardSample",
           "ShardStats"]


class ShardStats(NamedTuple):
    """One shard's totals: what the learner splits its batches by."""

    total_priority: float
    min_priority: float
    size: int


class ShardSample(NamedTuple):
    """One shard's answer to :meth:`ReplayShard.sample_many`.

    Attributes:
        samples: One :class:`PrioritizedSample` per batch ``m`` (``None`` where it asked for 0).
        stats: The shard's totals *after* drawing them, for the learner's next split.
    """

    samples: list[PrioritizedSample | None]
    stats: ShardStats


class ReplayShard:
    """One shard of the replay: a :class:`PrioritizedReplay` behind actor methods.

    Args:
        capacity, obs_dim, action_dim, alpha, seed: As for :class:`PrioritizedReplay`.
    """

    def __init__(self, capacity: int, obs_dim: int | ObsSpec, action_dim: int | None,
                 alpha: float, seed: int) -> None:
        self.replay = PrioritizedReplay(capacity, obs_dim, action_dim, alpha, seed=seed)

    def ping(self) -> bool:
        return True

    def add(self, batch: NStepBatch, td_errors: np.ndarray) -> int:
        """Store transitions with their initial ``|TD error|``; returns the shard's size."""
        self.replay.add(batch, td_errors)
        return len(self.replay)

    def stats(self) -> ShardStats:
        return ShardStats(self.replay.total_priority, self.replay.min_priority, len(self.replay))

    def sample_many(self, counts: list[int], beta: float) -> ShardSample:
        """One sample of ``counts[m]`` items for each batch ``m`` (``None`` where 0), with the
        shard's totals after drawing them."""
        samples = [self.replay.sample(c, beta) if c > 0 else None for c in counts]
        return ShardSample(samples, self.stats())

    def update_priorities(self, ids: np.ndarray, td_errors: np.ndarray) -> int:
        return self.replay.update_priorities(ids, td_errors)

    def histogram(self, bins: np.ndarray) -> np.ndarray:
        """Counts of stored priorities ``p = (|delta| + eps) ** alpha`` in ``bins``."""
        n = len(self.replay)
        return np.histogram(self.replay.tree[np.arange(n)], bins=bins)[0]


class ShardClient(Protocol):
    """How the worker and the learner talk to the shards (in one process or under Ray)."""

    def add(self, shard: int, batch: NStepBatch, td_errors: np.ndarray) -> None: ...

    def sample_many(self, counts: np.ndarray, beta: float) -> list[ShardSample]: ...

    def update_priorities(self, shard: int, ids: np.ndarray, td_errors: np.ndarray) -> None: ...

    def stats(self) -> list[ShardStats]: ...


class LocalShards:
    """Shards as plain objects in this process."""

    def __init__(self, shards: list[ReplayShard]) -> None:
        self.shards = shards

    def add(self, shard: int, batch: NStepBatch, td_errors: np.ndarray) -> None:
        self.shards[shard].add(batch, td_errors)

    def sample_many(self, counts: np.ndarray, beta: float) -> list[ShardSample]:
        return [s.sample_many(c.tolist(), beta) for s, c in zip(self.shards, counts)]

    def update_priorities(self, shard: int, ids: np.ndarray, td_errors: np.ndarray) -> None:
        self.shards[shard].update_priorities(ids, td_errors)

    def stats(self) -> list[ShardStats]:
        return [s.stats() for s in self.shards]


class RayShards:
    """Shards as Ray actors. ``add`` keeps one call in flight per caller (it waits for the
    previous add before sending the next: back-pressure, so a fast worker cannot queue
    unbounded data at a busy shard); ``update_priorities`` does not wait at all."""

    def __init__(self, handles: list[Any], timeout_s: float = 120.0) -> None:
        self.handles, self.timeout_s = handles, timeout_s
        self.pending_add: Any = None

    def __getstate__(self) -> dict[str, Any]:  # a copy sent to another actor starts afresh
        return {"handles": self.handles, "timeout_s": self.timeout_s, "pending_add": None}

    def add(self, shard: int, batch: NStepBatch, td_errors: np.ndarray) -> None:
        import ray

        if self.pending_add is not None:
            ray.get(self.pending_add, timeout=self.timeout_s)
        self.pending_add = self.handles[shard].add.remote(batch, td_errors)

    def sample_many(self, counts: np.ndarray, beta: float) -> list[ShardSample]:
        import ray

        refs = [h.sample_many.remote(c.tolist(), beta) for h, c in zip(self.handles, counts)]
        return ray.get(refs, timeout=self.timeout_s)

    def update_priorities(self, shard: int, ids: np.ndarray, td_errors: np.ndarray) -> None:
        self.handles[shard].update_priorities.remote(ids, td_errors)

    def stats(self) -> list[ShardStats]:
        import ray

        return ray.get([h.stats.remote() for h in self.handles], timeout=self.timeout_s)
