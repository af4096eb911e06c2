"""Replay for frame-stacked observations that keeps each frame once (issue 60, item 4).

An Atari observation is a stack of the last ``K`` frames, ``(K, H, W)`` uint8 (``(4, 84, 84)``).
:class:`~rlkit.replay.buffers.ReplayBuffer` stores ``obs`` and ``next_obs`` whole, so each
frame of an episode is stored ``2K`` times. :class:`FrameStackReplay` has the same interface
and stores each distinct frame once:

* **Frames** live in a ring of ``F`` frames: the frame with serial ``s`` (its insertion number)
  sits in ``frames[s % F]``. A transition keeps the ``K`` serials of its ``obs`` and the ``K``
  of its ``next_obs``; :meth:`FrameStackReplay.sample` gathers ``frames[serials % F]`` in one
  numpy indexing per field.
* **Reuse by content, verified.** Each incoming frame's 64-bit fingerprint (a weighted sum of
  its bytes, one vectorised pass a batch) is looked up in a table of recently stored frames. A
  hit within the reuse window (serial ``>= born - R``, ``born`` the frame counter when the
  transition arrives) is a candidate; a miss stores the frame anew. Every candidate is then
  compared byte for byte with the incoming frame, in one vectorised comparison a batch; a
  mismatch (a fingerprint collision) is stored anew too. So every stack comes back exactly as
  added, whatever it holds. Nothing is assumed about order or layout: an episode's ``obs`` reuses
  the ``K`` frames of the previous ``next_obs``, a ``next_obs`` shares ``K - 1`` frames with its
  ``obs`` (n-step ones with the previous window's ``next_obs``), a reset stack costs its distinct
  frames (one, for a stack padded by repeating the first frame), in any interleaving of envs,
  shards or workers. A stack whose frames never repeat (not a stack at all) saves nothing:
  ``2K`` new frames a transition.
* **Eviction keeps the two rings consistent.** A transition references only serials ``>= born -
  R`` and ``born`` grows with insertion order, so transitions are evicted oldest first as soon
  as ``born - R < written - F`` (frame serials below ``written - F`` are overwritten), before
  :meth:`~FrameStackReplay.add_batch` returns: a live transition's frames are all in the ring.
  A batch is stored in chunks of at most ``(F - R) // 2K`` transitions, so no chunk overwrites a
  frame it reuses.
* **Sizing** from ``capacity`` (C) and ``K``: the window is ``R = C // 32 + 32 K`` frames (a
  stack of ``N`` envs stepped together reaches about ``N K`` frames back) and the ring
  ``F = C + C // 16 + 64 K`` frames: one frame a transition, ``C // 32 + 32 K`` spare for the
  extra frames of episode starts (episodes of ``32 K`` steps or more keep all ``C``
  transitions), and ``R`` for the window. A stream that needs more frames a transition keeps
  fewer than ``C`` transitions (``len`` tells); ``frames=`` sizes the ring by hand (a non-stack
  stream needs ``F = 2K C + R``).
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from rlkit.core.spaces import ObsSpec
from rlkit.core.types import Batch, NStepBatch
from rlkit.core.validation import Rule, check_value, fail, int_rule
from rlkit.replay.buffers import check_state
from rlkit.replay.memory import check_buffer_memory
from rlkit.replay.nstep import check_batch, check_transition
from rlkit.replay.sum_tree import BATCH_SIZE, ring_slots

STACK_FIX = "pass ObsSpec((K, H, W), dtype), frames stacked channels first, e.g. (4, 84, 84) uint8"


def frame_layout(capacity: int, depth: int, frames: int | None = None) -> tuple[int, int]:
    """``(F, R)``: the frame ring's size (``frames`` if given) and the reuse window, in frames,
    for ``capacity`` transitions of stacks of ``depth`` frames (see the module docstring)."""
    window = capacity // 32 + 32 * depth
    return (capacity + capacity // 16 + 64 * depth if frames is None else frames), window


def frame_replay_bytes(capacity: int, spec: ObsSpec, action_dim: int | None,
                       n_step: bool = False, frames: int | None = None) -> int:
    """Bytes a :class:`FrameStackReplay` allocates (the analogue of
    :func:`~rlkit.replay.memory.replay_bytes`): ``F`` frames and their uint64 fingerprints, and
    a transition's ``2K`` int64 serials, its int64 ``born``, its action (int64, or
    ``action_dim`` float32), reward and termination (float32) and an n-step discount."""
    depth = spec.shape[0]
    ring, _ = frame_layout(capacity, depth, frames)
    action = 8 if action_dim is None else 4 * action_dim
    per_item = 2 * depth * 8 + 8 + action + 8 + (4 if n_step else 0)
    return ring * (spec.nbytes // depth + 8) + capacity * per_item


@lru_cache(maxsize=8)
def _weights(words: int) -> np.ndarray:
    """Fixed odd 64-bit weights of a frame's words (the same in every process)."""
    rng = np.random.default_rng(0x5EED)
    return rng.integers(0, 2**64, words, dtype=np.uint64) | np.uint64(1)


def fingerprints(raw: np.ndarray) -> np.ndarray:
    """``(n,)`` uint64 fingerprints of ``n`` frames given as their bytes, ``(n, B)`` uint8: a
    weighted sum of their 64-bit words, modulo ``2**64`` (a change of one word always changes
    it; equal fingerprints are only candidates, compared byte for byte before reuse)."""
    if pad := -raw.shape[1] % 8:
        raw = np.pad(raw, ((0, 0), (0, pad)))
    words = np.ascontiguousarray(raw).view(np.uint64)
    return np.asarray((words * _weights(words.shape[1])).sum(axis=1, dtype=np.uint64))


def check_frame_sizes(capacity: Any, obs: Any, action_dim: Any, seed: Any, n_step: Any,
                      frames: Any) -> ObsSpec:
    """Refuse, before anything is allocated, what :class:`FrameStackReplay` cannot take: sizes
    that are not ints >= 1, an ``obs`` that is not an :class:`ObsSpec` of channels-first stacks
    ``(K, H, W)``, a frame ring too small for one transition, storage too large for memory."""
    check_value("capacity", capacity, int_rule(1, example=1_000_000))
    if not isinstance(obs, ObsSpec) or len(obs.shape) != 3:
        fail("obs_dim", obs, "is not an ObsSpec of frame stacks (K, H, W)",
             f"{STACK_FIX}; keep vectors in ReplayBuffer")
    for side in obs.shape:
        check_value("obs_dim.shape", side, int_rule(1, example=4, meaning="a side"))
    if obs.shape[0] > obs.shape[-1]:
        fail("obs_dim.shape", obs.shape, "holds its channels last (rlkit reads the smaller of "
             "the first and last sides as the channels), so no frame could be shared", STACK_FIX)
    check_value("action_dim", action_dim, int_rule(1, example=1, optional=True,
                                                   meaning="the continuous action size"))
    check_value("seed", seed, int_rule(0, example=0))
    check_value("n_step", n_step, Rule("flag", fix="pass True or False"))
    _, window = frame_layout(capacity, obs.shape[0])
    check_value("frames", frames, int_rule(window + 2 * obs.shape[0], optional=True,
                                           meaning="the frame ring's size (None: sized for C)"))
    check_buffer_memory(capacity, obs, action_dim, what=" (frames kept once)",
                        nbytes=frame_replay_bytes(capacity, obs, action_dim, n_step, frames))
    return ObsSpec(*obs)


class FrameStackReplay:
    """A :class:`~rlkit.replay.buffers.ReplayBuffer` for frame stacks that stores each frame
    once (see the module docstring): same arguments (and ``frames``), methods, batches and
    sampling stream; :meth:`live_slots` and :meth:`rows` read the stored transitions back.

    Args:
        capacity: Maximum number of transitions kept.
        obs_dim: An :class:`~rlkit.core.spaces.ObsSpec` of stacks ``(K, H, W)``, channels first.
        action_dim: ``None`` for a discrete action (int64), else the continuous action's size.
        seed: Seed of the sampling RNG.
        n_step: Store and sample :class:`NStepBatch` transitions; ``False``: :class:`Batch`.
        frames: The frame ring's size ``F``; ``None`` sizes it from ``capacity`` and ``K``.
    """

    def __init__(self, capacity: int, obs_dim: ObsSpec, action_dim: int | None = None,
                 seed: int = 0, n_step: bool = False, frames: int | None = None) -> None:
        spec = check_frame_sizes(capacity, obs_dim, action_dim, seed, n_step, frames)
        self.capacity, self.obs_spec, self.action_dim, self.n_step = (capacity, spec,
                                                                      action_dim, n_step)
        self.frames_capacity, self.window = frame_layout(capacity, spec.shape[0], frames)
        self.frames = np.zeros((self.frames_capacity, *spec.shape[1:]), spec.dtype)
        self.fingerprints = np.zeros(self.frames_capacity, np.uint64)  # of each stored frame
        self.stacks = np.zeros((capacity, 2, spec.shape[0]), np.int64)  # obs, next_obs serials
        self.born = np.zeros(capacity, np.int64)  # frames written before the transition came
        self.actions = (np.zeros(capacity, np.int64) if action_dim is None
                        else np.zeros((capacity, action_dim), np.float32))
        self.rewards = np.zeros(capacity, np.float32)
        self.terminations = np.zeros(capacity, np.float32)
        self.fields = ("actions", "rewards", "terminations") + (("discounts",) if n_step else ())
        if n_step:
            self.discounts = np.zeros(capacity, np.float32)
        self.pos = self.size = self.written = 0  # next slot, live transitions, frames written
        self._table: dict[int, int] = {}  # fingerprint -> newest serial (stale ones ignored)
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, action: int | np.ndarray, reward: float,
            next_obs: np.ndarray, terminated: bool) -> None:
        """Store one transition (an n-step buffer stores discount 0, as a fresh
        ``ReplayBuffer`` slot holds). ``terminated`` is False for a time-limit truncation."""
        check_transition(self.obs_spec.shape, self.actions.shape[1:], self.action_dim is None,
                         obs, action, reward, next_obs, terminated)
        row = [np.asarray(obs)[None], np.asarray(action, self.actions.dtype)[None],
               np.array([reward], np.float32), np.asarray(next_obs)[None],
               np.array([terminated], np.float32)]
        self._put(row + ([np.zeros(1, np.float32)] if self.n_step else []))

    def add_batch(self, batch: Batch | NStepBatch) -> None:
        """Store ``len(batch)`` transitions in order, as :meth:`ReplayBuffer.add_batch` does (a
        batch larger than the capacity keeps its last ``capacity``); then evict those whose
        frames the ring overwrote. An n-step buffer takes only ``NStepBatch``es."""
        kind = NStepBatch if self.n_step else Batch
        shape, action = self.obs_spec.shape, self.actions.shape[1:]
        n = check_batch("FrameStackReplay.add_batch", batch, kind,
                        [shape, action, (), shape, (), ()][:len(kind._fields)],
                        self.action_dim is None, "pass an NStepBatch if n_step=True, else a Batch",
                        self.obs_spec.dtype)
        if n:
            self._put([np.asarray(values) for values in batch])

    def _put(self, columns: list[np.ndarray]) -> None:
        """Store checked columns (in :class:`Batch`/:class:`NStepBatch` order), chunk by chunk."""
        skip, _, _ = ring_slots(self.pos, len(columns[0]), self.capacity)
        self.pos = (self.pos + skip) % self.capacity
        step = (self.frames_capacity - self.window) // (2 * self.obs_spec.shape[0])
        for start in range(skip, len(columns[0]), step):
            self._store_chunk([values[start:start + step] for values in columns])

    def _store_chunk(self, columns: list[np.ndarray]) -> None:
        """Store ``m`` transitions whose new frames fit in ``F - R`` (see the module docstring)."""
        m, depth = len(columns[0]), self.obs_spec.shape[0]
        stacks = np.stack([columns[0], columns[3]], axis=1).astype(self.obs_spec.dtype,
                                                                     copy=False)
        flat = stacks.reshape(m * 2 * depth, *self.obs_spec.shape[1:])
        raw = self._bytes(flat)
        prints = fingerprints(raw)
        serials, born, fresh = self._assign(prints.tolist(), m, 2 * depth)
        self._write(serials[fresh], flat[fresh], prints[fresh])
        reused = np.setdiff1d(np.arange(len(flat)), fresh, assume_unique=True)
        found = self.frames[serials[reused] % self.frames_capacity]
        wrong = reused[(self._bytes(found) != raw[reused]).any(axis=1)]
        if len(wrong):  # fingerprint collisions: store those frames anew
            serials[wrong] = self.written + np.arange(len(wrong))
            self.written += len(wrong)
            self._write(serials[wrong], flat[wrong], prints[wrong])
        slots = (self.pos + np.arange(m)) % self.capacity
        self.stacks[slots] = serials.reshape(m, 2, depth)
        self.born[slots] = born
        for name, values in zip(("actions", "rewards", "terminations", "discounts"),
                                [columns[1], columns[2], *columns[4:]]):
            getattr(self, name)[slots] = values
        self.pos = (self.pos + m) % self.capacity
        self.size = min(self.size + m, self.capacity)
        self._evict()

    def _assign(self, prints: list[int], m: int, per_row: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each frame's serial: the newest stored frame of its fingerprint within the window,
        else a new one. Returns ``(serials, born per transition, indices of new frames)``."""
        serials, born, fresh = [0] * len(prints), [0] * m, []
        table, written = self._table, self.written
        for i in range(m):
            born[i], floor = written, written - self.window
            for j in range(i * per_row, (i + 1) * per_row):
                serial = table.get(prints[j], floor - 1)
                if serial < floor:
                    serial = table[prints[j]] = written
                    fresh.append(j)
                    written += 1
                serials[j] = serial
        self.written = written
        return (np.array(serials, np.int64), np.array(born, np.int64),
                np.array(fresh, np.int64))

    def _bytes(self, frames: np.ndarray) -> np.ndarray:
        """``(n, B)`` uint8: the bytes of ``n`` frames, one row each."""
        frame_bytes = self.obs_spec.nbytes // self.obs_spec.shape[0]
        return np.ascontiguousarray(frames).view(np.uint8).reshape(-1, frame_bytes)

    def _write(self, serials: np.ndarray, frames: np.ndarray, prints: np.ndarray) -> None:
        slots = serials % self.frames_capacity
        self.frames[slots], self.fingerprints[slots] = frames, prints

    def _evict(self) -> None:
        """Drop the oldest transitions whose frames may have been overwritten; keep the
        fingerprint table to about the window."""
        threshold = self.written - self.frames_capacity + self.window
        tail = (self.pos - self.size) % self.capacity
        self.size -= bisect.bisect_left(range(self.size), threshold,
                                        key=lambda j: self.born[(tail + j) % self.capacity])
        if len(self._table) > 2 * self.window:
            self._rebuild_table()

    def _rebuild_table(self) -> None:
        serials = np.arange(max(0, self.written - self.window), self.written)
        prints = self.fingerprints[serials % self.frames_capacity]
        self._table = dict(zip(prints.tolist(), serials.tolist()))

    def live_slots(self) -> np.ndarray:
        """Slots of the stored transitions, oldest first."""
        return (self.pos - self.size + np.arange(self.size)) % self.capacity

    def rows(self, slots: np.ndarray) -> Batch | NStepBatch:
        """The transitions in ``slots`` (copies), as :meth:`sample` returns them."""
        serials = self.stacks[slots] % self.frames_capacity
        obs, next_obs = self.frames[serials[:, 0]], self.frames[serials[:, 1]]
        actions, rewards, terms, *discounts = (getattr(self, name)[slots] for name in self.fields)
        if self.n_step:
            return NStepBatch(obs, actions, rewards, next_obs, terms, *discounts)
        return Batch(obs, actions, rewards, next_obs, terms)

    def sample(self, batch_size: int) -> Batch | NStepBatch:
        """Draw ``batch_size`` transitions uniformly, with replacement, with the draws of a
        ``ReplayBuffer`` of the same seed and contents.

        Raises:
            ValueError: if the buffer is empty or ``batch_size`` is not an int >= 1.
        """
        check_value("batch_size", batch_size, BATCH_SIZE)
        if self.size == 0:
            raise ValueError(f"cannot sample batch_size={batch_size} from an empty "
                             "FrameStackReplay. Fix: add transitions first (learning_starts "
                             ">= batch_size).")
        idx = self.rng.integers(0, self.size, size=batch_size)
        full = self.size == self.capacity
        return self.rows(idx if full else (self.pos - self.size + idx) % self.capacity)

    def state_dict(self) -> dict[str, Any]:
        """The stored transitions (oldest first) with the frames from the oldest they use (or
        the window's first) to the newest, the counters and the sampling RNG, as torch tensors
        and plain Python values."""
        live, first = self.live_slots(), max(0, self.written - self.window)
        if len(live):
            first = min(first, int(self.stacks[live].min()))
        kept = np.arange(first, self.written) % self.frames_capacity
        return {"capacity": self.capacity, "pos": self.pos, "size": self.size,
                "frames_capacity": self.frames_capacity, "written": self.written,
                "first_frame": first, "frames": torch.from_numpy(self.frames[kept]),
                **{name: torch.from_numpy(getattr(self, name)[live])
                   for name in ("stacks", "born", *self.fields)},
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved into a buffer of the same sizes."""
        owner, fix = "FrameStackReplay.load_state_dict", "pass what state_dict() returned"
        spare = type(self.rng.bit_generator)()
        n = check_state(owner, state, self.capacity,
                        {name: getattr(self, name) for name in ("stacks", "born", *self.fields)},
                        {"rng": lambda value: setattr(spare, "state", value)})
        if state.get("frames_capacity") != self.frames_capacity:
            fail("state['frames_capacity']", state.get("frames_capacity"), f"is not this "
                 f"buffer's {self.frames_capacity}", "build it with the same capacity and frames")
        written = check_value("state['written']", state.get("written"), int_rule(0, fix=fix))
        first = check_value("state['first_frame']", state.get("first_frame"), int_rule(
            max(0, written - self.frames_capacity), written, fix=fix))
        frames: Any = state.get("frames")
        stacks = state["stacks"]
        if (not isinstance(frames, torch.Tensor)
                or tuple(frames.shape) != (written - first, *self.frames.shape[1:])):
            fail("state['frames'].shape", getattr(frames, "shape", frames),
                 f"is not {written - first} frames of {self.frames.shape[1:]}", fix)
        if n and not first <= int(stacks.min()) <= int(stacks.max()) < written:
            fail("state['stacks']", "serials", f"lie outside [{first}, {written})", fix)
        live = (state["pos"] - n + np.arange(n)) % self.capacity
        for name in ("stacks", "born", *self.fields):
            store = getattr(self, name)
            store[live] = state[name].cpu().numpy().reshape((n, *store.shape[1:]))
        values = frames.cpu().numpy().astype(self.obs_spec.dtype)
        self._write(np.arange(first, written), values, fingerprints(self._bytes(values)))
        self.pos, self.size, self.written = state["pos"], n, written
        self._rebuild_table()
        self.rng.bit_generator.state = state["rng"]
