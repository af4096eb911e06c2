"""A wide sum tree (with a min tree beside it) over priorities, in vectorised numpy.

Prioritized replay draws item ``i`` with probability ``p_i / sum_j p_j``. Drawing by a prefix
sum, "find the first ``i`` whose running total passes ``u``", costs ``O(capacity)`` with a flat
array but ``O(levels)`` with a tree in which every node holds the sum of its children.

A binary tree over 131,072 slots has 17 levels, and in numpy each level costs a few array calls
for the whole batch: the call overhead, not the arithmetic, sets the speed. This tree is wide
instead. Each node has ``fanout`` (16) children, and the tree stops growing upwards once a level
has at most ``top_size`` (1,024) nodes; that top level is searched in one pass (a cumulative
sum and ``np.searchsorted``). 131,072 slots then need a top of 512 nodes and two levels of
16-wide nodes below it. Within a node, the running sums of the 16 children come from one
matrix product with a triangular matrix of ones, which numpy does faster than ``cumsum`` on
short rows. ``make bench`` (the ``apex`` entry) measures it against the binary tree.

Every node's sum is recomputed from its children after an update, never adjusted by a
difference, so rounding errors do not pile up however long a run is.

The module also holds what every replay structure shares about slots, at the bottom of
``rlkit.replay`` where each can import it: :func:`ring_slots`, :data:`BATCH_SIZE`, and the
checks of the arrays the public APIs take (:func:`index_array`, :func:`value_array`,
:func:`number_array`), each one vectorised pass with ``rlkit.core.validation``'s messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlkit.core.validation import check_value, fail, int_rule

#: A ``sample``'s batch size. Draws are with replacement, so it may exceed what is stored.
BATCH_SIZE = int_rule(1, example=64)


def ring_slots(pos: int, n: int, capacity: int) -> tuple[int, np.ndarray, int]:
    """Where ``n`` new items go in a ring of ``capacity`` slots whose next write is at ``pos``.

    Returns:
        ``(skip, slots, new_pos)``: drop the first ``skip`` items (they would be overwritten
        within the same batch), write the rest to ``slots``; the next write goes to
        ``new_pos``. The result is exactly that of adding the items one by one.
    """
    skip = max(0, n - capacity)
    slots = (pos + skip + np.arange(n - skip)) % capacity
    return skip, slots, (pos + n) % capacity


def number_array(name: str, values: Any, kinds: str, what: str, fix: str) -> np.ndarray:
    """``values`` (any array-like) as a flat numpy array whose dtype kind is in ``kinds``
    (``"iu"``: ints, ``"iuf"``: numbers), else a ``ValueError`` naming ``name`` and saying its
    entries must each be ``what`` (``"an int"``); O(1) unless a conversion is needed. An empty
    array of any dtype passes (``np.array([])`` is float)."""
    try:
        array = np.asarray(values).reshape(-1)
    except (TypeError, ValueError, RuntimeError) as error:  # a CUDA tensor, a ragged list
        fail(name, values, f"cannot be read as a numpy array ({error})", fix)
    if array.size and array.dtype.kind not in kinds:
        fail(f"{name}[0]", array[:1].tolist()[0],
             f"is not {what} ({name} has dtype {array.dtype})", fix)
    return array


def index_array(name: str, values: Any, high: int, fix: str, note: str = "") -> np.ndarray:
    """``values`` as a flat int64 array of indices in ``[0, high)``, else a ``ValueError``
    naming ``name`` and the first bad entry: a float, bool or str index (never truncated) or
    one out of range. One vectorised pass (a min and a max)."""
    array = number_array(name, values, "iu", "an int", fix).astype(np.int64, copy=False)
    if array.size and (array.min() < 0 or array.max() >= high):
        i = int(np.flatnonzero((array < 0) | (array >= high))[0])
        fail(f"{name}[{i}]", int(array[i]),
             f"is out of range: {name} must be in [0, {high}){note}", fix)
    return array


def value_array(name: str, values: Any, rule: str, fix: str, low: float = 0.0) -> np.ndarray:
    """``values`` as a flat float64 array, each finite and ``>= low``, else a ``ValueError``
    naming ``name``, the first bad entry and ``rule``. One vectorised pass."""
    array = number_array(name, values, "iuf", "a number", fix).astype(np.float64, copy=False)
    ok = np.isfinite(array) & (array >= low)
    if not ok.all():
        i = int(np.argmin(ok))
        fail(f"{name}[{i}]", float(array[i]), rule, fix)
    return array


def _last_write_wins(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique ``indices`` and, for each, the value of its last occurrence, so that an
    index repeated in one call ends as it would after updating it twice in order."""
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    last = np.empty(len(ordered), dtype=bool)
    last[-1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    return ordered[last], values[order][last]


def tree_level_sizes(capacity: int, fanout: int = 16, top_size: int = 1024) -> list[int]:
    """Entries of each level of a :class:`PriorityTree` over ``capacity`` leaves, top first:
    the top holds at most ``top_size`` sums, each level below ``fanout`` times more."""
    size, depth = capacity, 0
    while size > top_size:
        size, depth = -(-size // fanout), depth + 1
    return [size * fanout**d for d in range(depth + 1)]


class PriorityTree:
    """Sums and minima of non-negative priorities over ``capacity`` slots.

    Args:
        capacity: Number of slots (leaves). Slots start empty: priority 0, left out of the min.
        fanout: Children per node below the top level (>= 2).
        top_size: The tree grows upwards until a level has at most this many nodes.

    Attributes:
        capacity: Number of usable slots.
        levels: ``levels[0]`` is the top level, ``levels[-1]`` the leaves (padded with empty
            slots); ``levels[d][j]`` is the sum of ``levels[d + 1][j * fanout:(j + 1) * fanout]``.
        min_levels: The same layout holding minima over filled slots (``inf`` where empty).
    """

    def __init__(self, capacity: int, fanout: int = 16, top_size: int = 1024) -> None:
        for name, value, low, example in (("capacity", capacity, 1, 100_000),
                                          ("fanout", fanout, 2, 16),
                                          ("top_size", top_size, 1, 1024)):
            check_value(name, value, int_rule(low, example=example))
        self.capacity = capacity
        self.fanout = fanout
        self.levels = [np.zeros(n) for n in tree_level_sizes(capacity, fanout, top_size)]
        self.min_levels = [np.full(n, np.inf) for n in tree_level_sizes(capacity, fanout,
                                                                           top_size)]
        self._prefix_matrix = np.triu(np.ones((fanout, fanout)))  # row @ it = running sums
        self._ones = np.ones(fanout)  # row @ it = the row's sum

    @property
    def total(self) -> float:
        """Sum of all priorities."""
        return float(self.levels[0].sum())

    @property
    def min(self) -> float:
        """Smallest priority of a filled slot (``inf`` while every slot is empty)."""
        return float(self.min_levels[0].min())

    def __getitem__(self, indices: np.ndarray) -> np.ndarray:
        """Priorities at ``indices`` ``(B,)``."""
        return self.levels[-1][indices]

    def update(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set ``priorities[k]`` at slot ``indices[k]``; the last of repeated indices wins.

        Args:
            indices: ``(B,)`` ints in ``[0, capacity)``.
            priorities: ``(B,)`` finite values >= 0. A priority of 0 empties the slot.

        Raises:
            ValueError: for a float or out-of-range index, a negative or non-finite priority,
                or lengths that differ.
        """
        indices = index_array("indices", indices, self.capacity, "pass int slot numbers",
                              ", the tree's slots")
        priorities = value_array(
            "priorities", priorities, "is not a priority: priorities must be finite and >= 0",
            "pass |TD error|, which is NaN only if the loss diverged (lower the learning rate)")
        if len(indices) != len(priorities):
            fail("len(priorities)", len(priorities), f"differs from len(indices)={len(indices)}",
                 "pass one priority per index")
        if len(indices) == 0:
            return
        nodes, values = _last_write_wins(indices, priorities)
        self.levels[-1][nodes] = values
        self.min_levels[-1][nodes] = np.where(values > 0, values, np.inf)
        f = self.fanout
        for depth in range(len(self.levels) - 2, -1, -1):
            nodes = nodes // f  # repeats are harmless: each writes the same recomputed value
            children = np.take(self.levels[depth + 1].reshape(-1, f), nodes, axis=0)  # (B, f)
            self.levels[depth][nodes] = children @ self._ones
            # min over a row of 16 is ~4x faster on the transposed copy (a vectorised reduce)
            child_mins = np.take(self.min_levels[depth + 1].reshape(-1, f), nodes, axis=0)
            self.min_levels[depth][nodes] = np.ascontiguousarray(child_mins.T).min(axis=0)

    def find_prefix(self, targets: np.ndarray) -> np.ndarray:
        """For each ``u`` in ``targets``, the slot ``i`` with
        ``sum(q[:i]) <= u < sum(q[:i + 1])`` (``q``: the priorities the tree holds), which
        always has a priority > 0.

        Args:
            targets: ``(B,)`` floats in ``[0, total)``. Rounding may put one at ``total`` or
                a hair past a node's sum; it is then held just inside, at a filled slot.

        Returns:
            ``(B,)`` int64 slot indices.

        Raises:
            ValueError: if every priority is 0, or a target is NaN, infinite or negative.
        """
        return self._descend(value_array(
            "targets", targets, "is not a prefix sum: targets must be finite and >= 0",
            "draw targets as rng.random(B) * tree.total"))

    def _descend(self, targets: np.ndarray) -> np.ndarray:
        """:meth:`find_prefix` without its checks (``targets``: finite float64 >= 0)."""
        top = self.levels[0]
        running = np.cumsum(top)
        if not running[-1] > 0:
            raise ValueError("cannot sample: every priority is 0. Fix: add items first.")
        u = np.minimum(targets, np.nextafter(running[-1], 0))
        node = np.searchsorted(running, u, side="right")  # first running sum > u
        u = u - (running[node] - top[node])
        f = self.fanout
        rows = np.arange(len(u)) * f
        for depth in range(1, len(self.levels)):
            children = np.take(self.levels[depth].reshape(-1, f), node, axis=0)  # (B, f)
            running = children @ self._prefix_matrix  # (B, f) running sums
            u = np.minimum(u, np.nextafter(running[:, -1], 0))
            child = np.argmax(running > u[:, None], axis=1)  # first running sum > u
            flat = rows + child
            u = u - (running.ravel()[flat] - children.ravel()[flat])
            node = node * f + child
        return node

    def stratified_sample(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``batch_size`` slots drawn in proportion to their priorities: one uniform draw in each
        of ``batch_size`` equal strata of ``[0, total)``.

        Stratifying spreads a batch over the whole range of priorities (fewer repeats of one
        high-priority item than independent draws give), while the expected number of times
        slot ``i`` appears in a batch stays exactly ``batch_size * p_i / total``.

        Returns:
            ``(batch_size,)`` int64 slot indices.
        """
        check_value("batch_size", batch_size, BATCH_SIZE)
        if not isinstance(rng, np.random.Generator):
            fail("rng", rng, "must be a numpy Generator", "pass np.random.default_rng(seed)")
        total = float(self.levels[0].sum())
        bounds = (np.arange(batch_size) + rng.random(batch_size)) * (total / batch_size)
        return self._descend(bounds)
