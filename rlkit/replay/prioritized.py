"""Prioritized experience replay (Schaul et al. 2016), as Ape-X uses it (Horgan et al. 2018).

Item ``i`` with TD error ``delta_i`` is stored with priority ``p_i = (|delta_i| + eps) ** alpha``
and drawn with probability ``P(i) = p_i / sum_j p_j``. Drawing surprising transitions more often
changes the distribution the loss is averaged over, so each sample's loss is weighted by

    w_i = (N * P(i)) ** -beta / max_j w_j = (p_i / p_min) ** -beta

(``N`` items stored), with ``beta`` annealed from 0.4 to 1, where the correction is exact.
The learner sends the new ``|delta_i|`` back after each batch.

Items are kept in a ring (the oldest is overwritten first). Every item gets an id, its
insertion number; its slot is ``id % capacity``. ``update_priorities`` takes ids, not slots,
and ignores an id whose slot has since been overwritten, which happens when a learner's batch
was sampled from a shard that kept receiving new data before the priorities came back.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from rlkit.core.spaces import ObsSpec
from rlkit.core.types import NStepBatch
from rlkit.core.validation import check_value, fail, number_rule
from rlkit.replay.buffers import check_sizes
from rlkit.replay.memory import check_buffer_memory, replay_bytes
from rlkit.replay.nstep import check_batch
from rlkit.replay.sum_tree import (BATCH_SIZE, PriorityTree, index_array, number_array,
                                   ring_slots, value_array)

_FIELDS = NStepBatch._fields
#: The importance-sampling exponent: 0 (no correction) to 1 (full correction).
BETA = number_rule(at_least=0, at_most=1, example=0.4)
#: The prioritisation exponent: 0 (uniform) to 1 (in full proportion to |TD error|).
ALPHA = number_rule(at_least=0, at_most=1, example=0.6)
MIN_PRIORITY = number_rule(above=0, fix="pass the smallest stored priority "
                           "(PrioritizedReplay.min_priority)")
PROGRESS = number_rule(example=0.5, meaning="clipped to [0, 1]")  # the fraction of the run done
BETA_END = number_rule(at_least=0, at_most=1, example=1.0)


class PrioritizedSample(NamedTuple):
    """What :meth:`PrioritizedReplay.sample` returns.

    Attributes:
        batch: ``B`` transitions (copies).
        ids: ``(B,)`` int64 item ids, to send back with the new priorities.
        priorities: ``(B,)`` float64 stored priorities ``p_i`` (after the ``alpha`` power).
        weights: ``(B,)`` float32 importance weights ``(p_i / p_min) ** -beta``, at most 1.
    """

    batch: NStepBatch
    ids: np.ndarray
    priorities: np.ndarray
    weights: np.ndarray


def check_alpha(alpha: float, field: str = "alpha") -> None:
    """Reject a prioritisation exponent outside ``[0, 1]`` (0 = uniform, 1 = fully
    proportional)."""
    if not ALPHA.accepts(alpha):
        fail(field, alpha, "must be in [0, 1] (0 samples uniformly, 1 in full proportion to "
             "|TD error|)", f"use {field}=0.6, the Ape-X value")


def check_td_errors(td_errors: np.ndarray, field: str = "td_errors") -> np.ndarray:
    """``td_errors`` as a flat float64 array, or a ``ValueError`` naming ``field`` if one is
    negative, NaN, infinite or not a number (one vectorised pass)."""
    return value_array(field, td_errors, "cannot become a priority: priorities must be finite "
                       "and >= 0 (|TD error|)", "pass abs(td_error); a NaN means the loss "
                       "diverged (lower the learning rate)")


def importance_weights(priorities: np.ndarray, min_priority: float, beta: float) -> np.ndarray:
    """``(q_i / q_min) ** -beta``: Schaul et al.'s ``(N P(i)) ** -beta`` divided by its largest
    possible value, which belongs to the least likely item (``N`` and the total cancel).

    Args:
        priorities: ``(B,)`` stored priorities ``q_i = p_i ** alpha`` of the sampled items
            (``p_i = |delta_i| + eps``).
        min_priority: the smallest stored priority (over every shard, for sharded replay).
        beta: 0 (no correction) to 1 (full correction).

    Returns:
        ``(B,)`` float32 weights in ``(0, 1]``.

    Raises:
        ValueError: if ``beta`` is not in ``[0, 1]``, ``min_priority`` is not finite and > 0,
            or a priority is below ``min_priority`` (or not finite).
    """
    check_value("beta", beta, BETA)
    check_value("min_priority", min_priority, MIN_PRIORITY)
    return _weights(value_array(
        "priorities", priorities, f"is not a stored priority: priorities must be finite and >= "
        f"min_priority={min_priority}", "pass the priorities a sample returned", min_priority),
        min_priority, beta)


def _weights(priorities: np.ndarray, min_priority: float, beta: float) -> np.ndarray:
    """:func:`importance_weights` without its checks."""
    return ((priorities / min_priority) ** -beta).astype(np.float32)


def beta_at(progress: float, beta_start: float = 0.4, beta_end: float = 1.0) -> float:
    """``beta`` annealed linearly from ``beta_start`` to ``beta_end`` over ``progress`` in
    ``[0, 1]`` (the fraction of the run done: Ape-X passes env steps / ``total_steps``, so the
    schedule scales with the budget, and a run that solves early stops before ``beta`` = 1)."""
    check_value("progress", progress, PROGRESS)
    check_value("beta_start", beta_start, BETA)
    check_value("beta_end", beta_end, BETA_END)
    return beta_start + (beta_end - beta_start) * min(max(progress, 0.0), 1.0)


class PrioritizedReplay:
    """A ring buffer of n-step transitions with proportional priorities.

    Args:
        capacity: Maximum number of transitions kept; the oldest is overwritten first.
        obs_dim: A flat float32 observation's size, or an :class:`~rlkit.core.spaces.ObsSpec`
            (frames kept in their own dtype).
        action_dim: ``None`` for discrete actions (int64), else the action vector size.
        alpha: Prioritisation exponent in ``[0, 1]``.
        eps: Added to ``|delta|`` so that no item gets probability 0.
        seed: Seed of the sampling generator (saved in :meth:`state_dict`).
    """

    def __init__(self, capacity: int, obs_dim: int | ObsSpec, action_dim: int | None = None,
                 alpha: float = 0.6, eps: float = 1e-3, seed: int = 0) -> None:
        check_alpha(alpha)
        check_value("eps", eps, number_rule(above=0, example=1e-3,
                                            meaning="so that every item can be drawn"))
        spec = check_sizes(capacity, obs_dim, action_dim, seed)
        check_buffer_memory(capacity, spec, action_dim, what=" (with its priority trees)",
                            nbytes=replay_bytes(capacity, spec, action_dim, True))
        self.capacity, self.alpha, self.eps = capacity, float(alpha), float(eps)
        self.tree = PriorityTree(capacity)
        act_shape, act_dtype = ((), np.int64) if action_dim is None else ((action_dim,),
                                                                          np.float32)
        self.storage = NStepBatch(
            obs=np.zeros((capacity, *spec.shape), spec.dtype),
            actions=np.zeros((capacity, *act_shape), act_dtype),
            rewards=np.zeros(capacity, np.float32),
            next_obs=np.zeros((capacity, *spec.shape), spec.dtype),
            terminations=np.zeros(capacity, np.float32),
            discounts=np.zeros(capacity, np.float32))
        self.added = 0  # items ever added; the next item's id
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    @property
    def total_priority(self) -> float:
        """Sum of stored priorities (what a sharded learner splits its batch by)."""
        return self.tree.total

    @property
    def min_priority(self) -> float:
        """Smallest stored priority (``inf`` when empty)."""
        return self.tree.min

    def priority_of(self, td_errors: np.ndarray) -> np.ndarray:
        """The stored priority ``q = p ** alpha``, ``p = |delta| + eps``, for ``(B,)``
        non-negative TD errors."""
        return (check_td_errors(td_errors) + self.eps) ** self.alpha

    def add(self, batch: NStepBatch, td_errors: np.ndarray) -> None:
        """Store ``len(batch)`` transitions with their ``|TD error|`` (from the actor that
        collected them), overwriting the oldest when full.

        Raises:
            ValueError: if the lengths differ or a TD error is negative, NaN or infinite, or
                ``batch`` does not fit the storage (see :func:`~rlkit.replay.nstep.check_batch`).
        """
        n = check_batch("PrioritizedReplay.add", batch, NStepBatch,
                        [store.shape[1:] for store in self.storage],
                        self.storage.actions.dtype.kind == "i",
                        obs_dtype=self.storage.obs.dtype)
        priorities = self.priority_of(td_errors)
        if len(priorities) != n:
            fail("len(td_errors)", len(priorities), f"differs from the batch's {n} transitions",
                 "pass one |TD error| per transition")
        if n == 0:
            return
        skip, slots, _ = ring_slots(self.added % self.capacity, n, self.capacity)
        for store, values in zip(self.storage, batch, strict=True):
            store[slots] = np.asarray(values)[skip:]
        self.tree.update(slots, priorities[skip:])
        self.added += n

    def sample(self, batch_size: int, beta: float) -> PrioritizedSample:
        """Draw ``batch_size`` items by stratified proportional sampling.

        Raises:
            ValueError: if the buffer is empty, ``batch_size`` is not an int >= 1 or ``beta``
                is not in ``[0, 1]``. A ``batch_size`` above ``len(self)`` is fine (Ape-X
                draws a shard's share of a batch by its total priority, not its size).
        """
        check_value("batch_size", batch_size, BATCH_SIZE)
        check_value("beta", beta, BETA)
        if self.added == 0:
            raise ValueError(f"cannot sample batch_size={batch_size} from an empty "
                             "PrioritizedReplay. Fix: add transitions first (learning_starts "
                             ">= batch_size).")
        slots = self.tree.stratified_sample(batch_size, self.rng)
        priorities = self.tree[slots]
        batch = NStepBatch(*(store[slots] for store in self.storage))
        ids = self.id_of(slots)
        weights = _weights(priorities, self.tree.min, beta)
        return PrioritizedSample(batch, ids, priorities, weights)

    def id_of(self, slots: np.ndarray) -> np.ndarray:
        """Ids of the items now in ``slots`` (the newest item ever written there)."""
        newest_slot = (self.added - 1) % self.capacity
        base = self.added - 1 - newest_slot  # id of the item in slot 0 of the current lap
        return np.where(slots <= newest_slot, base + slots, base - self.capacity + slots)

    def update_priorities(self, ids: np.ndarray, td_errors: np.ndarray) -> int:
        """Set new ``|TD error|`` for items ``ids``; ids already overwritten are skipped.

        Returns:
            How many of the ``ids`` were still stored and got updated.

        Raises:
            ValueError: if a TD error is negative, NaN or infinite, an id is not an int or was
                never issued, or the lengths differ.
        """
        ids = index_array("ids", ids, self.added, "pass the ids that sample() returned",
                          ", the ids of the items added so far")
        priorities = self.priority_of(td_errors)
        if len(ids) != len(priorities):
            fail("len(td_errors)", len(priorities), f"differs from len(ids)={len(ids)}",
                 "pass one |TD error| per id")
        live = ids >= self.added - self.capacity
        self.tree.update(ids[live] % self.capacity, priorities[live])
        return int(live.sum())

    def state_dict(self) -> dict[str, Any]:
        """Stored items, priorities, the id counter and the sampling generator."""
        n = len(self)
        return {"capacity": self.capacity, "added": self.added,
                **{name: torch.from_numpy(store[:n].copy())
                   for name, store in zip(_FIELDS, self.storage, strict=True)},
                "priorities": torch.from_numpy(self.tree[np.arange(n)].copy()),
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved into a buffer of the same capacity."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"the checkpoint's replay has capacity {state['capacity']}, this "
                             f"one {self.capacity}. Fix: set buffer_size={state['capacity']}.")
        n = min(state["added"], self.capacity)
        for name, store in zip(_FIELDS, self.storage, strict=True):
            store[:n] = state[name].numpy()
        self.tree = PriorityTree(self.capacity)
        self.tree.update(np.arange(n), state["priorities"].numpy())
        self.added = state["added"]
        self.rng.bit_generator.state = state["rng"]


def split_by_priority(totals: np.ndarray, batch_size: int,
                      rng: np.random.Generator) -> np.ndarray:
    """How many of ``batch_size`` samples to draw from each of ``K`` replay shards: a
    multinomial draw in proportion to the shards' total priorities.

    Drawing a shard with probability ``T_k / T`` and then an item in it with probability
    ``p_i / T_k`` draws the item with probability ``p_i / T``: exactly what one unsharded
    replay would do. Round-robin (equal counts per shard) would instead favour the items of a
    shard whose total is small, and the importance weights would have to undo that.

    Args:
        totals: ``(K,)`` total priorities of the shards (0 for an empty shard).
        batch_size: Samples to split.
        rng: Generator for the draw.

    Returns:
        ``(K,)`` int64 counts summing to ``batch_size``.
    """
    check_value("batch_size", batch_size, BATCH_SIZE)
    if not isinstance(rng, np.random.Generator):
        fail("rng", rng, "must be a numpy Generator", "pass np.random.default_rng(seed)")
    fix = "wait until a shard holds data"
    totals = number_array("totals", totals, "iuf", "a number", fix).astype(np.float64, copy=False)
    if not (totals.size and np.isfinite(totals).all() and totals.min() >= 0 and totals.sum() > 0):
        fail("totals", totals.tolist(), "must be the shard totals: finite, >= 0 and not all 0",
             fix)
    return rng.multinomial(batch_size, totals / totals.sum())
