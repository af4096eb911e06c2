"""Replay buffers: a preallocated numpy ring buffer, and one whose storage lives on a torch
device."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlkit.core.types import Batch, NStepBatch, TensorBatch

#: Bytes above which ReplayBuffer refuses to allocate unless told otherwise (8 GiB).
MAX_BUFFER_BYTES = 8 * 2**30


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


_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminations")


def free_memory_bytes(device: str | torch.device = "cpu") -> int | None:
    """Memory free for a new buffer on ``device``: available host RAM (via psutil, pinned in
    requirements.txt) or free GPU memory; ``None`` if it cannot be told."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def check_buffer_memory(capacity: int, obs_dim: int, action_dim: int | None,
                        device: str | torch.device = "cpu") -> int:
    """Estimate a buffer's bytes *before* allocating it; refuse one that would not fit.

    The limit is :data:`MAX_BUFFER_BYTES` or 80% of the memory free on ``device``, whichever is
    smaller. Returns the estimate.

    Raises:
        ValueError: naming ``buffer_size`` and the largest capacity that would fit.
    """
    nbytes = ReplayBuffer.estimate_bytes(capacity, obs_dim, action_dim)
    free = free_memory_bytes(device)
    limit = MAX_BUFFER_BYTES if free is None else min(MAX_BUFFER_BYTES, int(0.8 * free))
    if nbytes > limit:
        per_item = max(1, nbytes // max(1, capacity))
        raise ValueError(
            f"buffer_size={capacity} would need {nbytes / 2**30:.1f} GiB on {device}, more than "
            f"the {limit / 2**30:.1f} GiB allowed (80% of free memory, at most "
            f"{MAX_BUFFER_BYTES / 2**30:.0f} GiB). Fix: use buffer_size <= {limit // per_item}.")
    return nbytes


def _check_buffer_state(state: dict[str, Any], capacity: int) -> None:
    if state["capacity"] != capacity:
        raise ValueError(
            f"the checkpoint's replay buffer has capacity {state['capacity']}, this run's "
            f"buffer_size is {capacity}. Fix: set buffer_size={state['capacity']}, or resume "
            f"from a checkpoint saved with checkpoint_buffer=False.")


class ReplayBuffer:
    """Fixed-capacity ring buffer: once full, each new transition overwrites the oldest.

    Storage is allocated once, so ``add`` and ``sample`` never allocate per transition and
    sampling is O(batch size), unlike indexing into a ``deque``.

    Args:
        capacity: Maximum number of transitions kept.
        obs_dim: Size of a flat observation.
        action_dim: ``None`` for a discrete action (stored as one int64); otherwise the size of
            a continuous action vector (stored as float32).
        seed: Seed of the buffer's own sampling RNG.
        n_step: Store :class:`rlkit.core.types.NStepBatch` transitions (each with its own bootstrap
            factor ``discounts = gamma ** k``) and sample them as such; ``False``: plain
            one-step :class:`Batch` transitions.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int | None = None,
                 seed: int = 0, n_step: bool = False) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity={capacity!r} must be a positive int. "
                             "Fix: pass the number of transitions to keep, e.g. 50_000.")
        if not isinstance(obs_dim, int) or obs_dim < 1:
            raise ValueError(f"obs_dim={obs_dim!r} must be a positive int (the flat "
                             "observation size).")
        check_buffer_memory(capacity, obs_dim, action_dim)
        self.capacity = capacity
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), dtype=np.float32)
        if action_dim is None:
            self.actions = np.zeros((capacity,), dtype=np.int64)
        else:
            self.actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.rewards = np.zeros((capacity,), dtype=np.float32)
        self.terminations = np.zeros((capacity,), dtype=np.float32)
        self.n_step = n_step
        self.fields = _FIELDS + (("discounts",) if n_step else ())
        if n_step:
            self.discounts = np.zeros((capacity,), dtype=np.float32)
        self.pos = 0  # index the next transition is written to
        self.size = 0  # number of valid transitions
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def estimate_bytes(capacity: int, obs_dim: int, action_dim: int | None) -> int:
        """Bytes the storage arrays of a buffer with these sizes would take."""
        per_item = 4 * (2 * obs_dim + 2) + (8 if action_dim is None else 4 * action_dim)
        return int(capacity) * per_item

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, action: int | np.ndarray, reward: float,
            next_obs: np.ndarray, terminated: bool) -> None:
        """Store one transition. ``terminated`` must be False for a time-limit truncation."""
        i = self.pos
        self.obs[i] = obs
        self.actions[i] = action
        self.rewards[i] = reward
        self.next_obs[i] = next_obs
        self.terminations[i] = float(terminated)
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def add_batch(self, batch: Batch | NStepBatch) -> None:
        """Store ``len(batch)`` transitions in order, wrapping around the end of the ring.

        A batch larger than the capacity keeps only its last ``capacity`` transitions, exactly
        as adding them one by one would. An n-step buffer takes only ``NStepBatch``es.
        """
        if len(batch._fields) != len(self.fields):
            want = "NStepBatch" if self.n_step else "Batch"
            raise ValueError(f"this buffer stores {want}es, got a {type(batch).__name__}. Fix: "
                             "build the buffer with n_step=True for n-step transitions (and "
                             "pass those only), or n_step=False for one-step ones.")
        n = len(batch)
        if n == 0:
            return
        skip, slots, self.pos = ring_slots(self.pos, n, self.capacity)
        for name, values in zip(self.fields, batch):
            getattr(self, name)[slots] = np.asarray(values)[skip:]
        self.size = min(self.size + n, self.capacity)

    def state_dict(self) -> dict[str, Any]:
        """The stored transitions, the write position and the sampling RNG, as torch tensors
        and plain Python values (what a checkpoint file may hold; see :mod:`rlkit.checkpoint`)."""
        n = self.size
        return {"capacity": self.capacity, "pos": self.pos, "size": n,
                **{name: torch.from_numpy(getattr(self, name)[:n].copy())
                   for name in self.fields},
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved into a buffer of the same capacity and sizes."""
        _check_buffer_state(state, self.capacity)
        n = state["size"]
        for name in self.fields:
            if name not in state:
                raise ValueError(f"the saved buffer has no {name!r}: it was saved by a buffer "
                                 "with another n_step setting. Fix: resume with the config "
                                 "that wrote the checkpoint.")
            getattr(self, name)[:n] = state[name].numpy()
        self.pos, self.size = state["pos"], n
        self.rng.bit_generator.state = state["rng"]

    def sample(self, batch_size: int) -> Batch | NStepBatch:
        """Draw ``batch_size`` transitions uniformly, with replacement.

        Returns:
            A :class:`Batch` (an :class:`NStepBatch` for an n-step buffer) of copies (the
            buffer may overwrite its rows afterwards).

        Raises:
            ValueError: if the buffer is empty.
        """
        if self.size == 0:
            raise ValueError("cannot sample from an empty ReplayBuffer. Fix: add transitions "
                             "first (learning_starts must be at least the batch size).")
        idx = self.rng.integers(0, self.size, size=batch_size)
        if self.n_step:
            return NStepBatch(*(getattr(self, name)[idx] for name in self.fields))
        return Batch(self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx],
                     self.terminations[idx])


class TensorReplayBuffer:
    """A ring buffer whose storage lives on a torch device (a GPU when the learner has one).

    Fragments are copied to the device once, when added; ``sample`` then draws indices and
    gathers rows on the device, so a gradient step never copies a batch from host to device.

    Args:
        capacity: Maximum number of transitions kept.
        obs_dim: Observation size.
        action_dim: Size of the (continuous) action vector.
        device: Where the storage lives.
        seed: Seed of the sampling generator.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int,
                 device: str | torch.device = "cpu", seed: int = 0) -> None:
        check_buffer_memory(capacity, obs_dim, action_dim, device)
        self.device = torch.device(device)
        self.capacity = capacity
        f32 = dict(dtype=torch.float32, device=self.device)
        self.obs = torch.zeros((capacity, obs_dim), **f32)
        self.next_obs = torch.zeros((capacity, obs_dim), **f32)
        self.actions = torch.zeros((capacity, action_dim), **f32)
        self.rewards = torch.zeros((capacity,), **f32)
        self.terminations = torch.zeros((capacity,), **f32)
        self.pos = 0
        self.size = 0
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def __len__(self) -> int:
        return self.size

    def add_batch(self, batch: Batch) -> None:
        """Copy ``len(batch)`` numpy transitions to the device, wrapping around the ring."""
        n = len(batch)
        if n == 0:
            return
        skip, slots, self.pos = ring_slots(self.pos, n, self.capacity)
        idx = torch.as_tensor(slots, device=self.device)
        for store, values in zip((self.obs, self.actions, self.rewards, self.next_obs,
                                  self.terminations), batch):
            # a copy: arrays that arrive through Ray are read-only views of the object store
            rows = torch.from_numpy(np.array(np.asarray(values)[skip:], dtype=np.float32))
            store[idx] = rows.reshape((len(slots), *store.shape[1:])).to(self.device,
                                                                          non_blocking=True)
        self.size = min(self.size + n, self.capacity)

    def state_dict(self) -> dict[str, Any]:
        """As :meth:`ReplayBuffer.state_dict`, with the rows copied to the host."""
        n = self.size
        return {"capacity": self.capacity, "pos": self.pos, "size": n,
                **{name: getattr(self, name)[:n].cpu() for name in _FIELDS},
                "generator": self.generator.get_state(), "generator_device": self.device.type}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved, onto this buffer's device. A sampling stream
        saved on another kind of device (a CPU run resumed on a GPU) cannot be restored, since
        the two generators keep different states: the sampler is then reseeded."""
        _check_buffer_state(state, self.capacity)
        n = state["size"]
        for name in _FIELDS:
            store = getattr(self, name)
            store[:n] = state[name].reshape((n, *store.shape[1:])).to(store.dtype).to(self.device)
        self.pos, self.size = state["pos"], n
        if state.get("generator_device", self.device.type) == self.device.type:
            self.generator.set_state(state["generator"])
        else:
            self.generator.manual_seed(n)

    def sample(self, batch_size: int) -> TensorBatch:
        """``batch_size`` transitions drawn uniformly with replacement, on the device."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty TensorReplayBuffer. Fix: add "
                             "transitions first (learning_starts must be >= the batch size).")
        idx = torch.randint(0, self.size, (batch_size,), device=self.device,
                            generator=self.generator)
        return TensorBatch(self.obs[idx], self.actions[idx], self.rewards[idx],
                           self.next_obs[idx], self.terminations[idx])
