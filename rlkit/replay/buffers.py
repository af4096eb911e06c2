"""Replay buffers: a preallocated numpy ring buffer, and one whose storage lives on a torch
device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlkit.core.spaces import ObsSpec, as_obs_spec
from rlkit.core.types import Batch, NStepBatch, TensorBatch
from rlkit.core.validation import Rule, check_value, fail, int_rule, require_instance
from rlkit.replay.memory import check_buffer_memory
from rlkit.replay.nstep import check_batch, check_transition
from rlkit.replay.sum_tree import BATCH_SIZE, ring_slots

_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminations")


def check_sizes(capacity: Any, obs: Any, action_dim: Any, seed: Any, device: Any = "cpu",
                discrete: bool = True) -> ObsSpec:
    """Before anything is allocated, refuse sizes that are not ints >= 1 (a discrete
    ``action_dim`` is ``None``), storage too large for memory, or a seed that is not an int.
    ``obs``: a vector's size, or an :class:`~rlkit.core.spaces.ObsSpec`; returns the spec."""
    check_value("capacity", capacity, int_rule(1, example=50_000))
    if isinstance(obs, ObsSpec):
        for side in obs.shape:
            check_value("obs_spec.shape", side, int_rule(1, example=4, meaning="a side"))
    else:
        check_value("obs_dim", obs, int_rule(1, example=4, meaning="the flat observation size"))
    check_value("action_dim", action_dim, int_rule(1, example=1, optional=discrete,
                                                   meaning="the continuous action size"))
    check_value("seed", seed, int_rule(0, example=0))
    check_buffer_memory(capacity, obs, action_dim, device)
    return as_obs_spec(obs)


def require_replay_settings(config: Any) -> None:
    """The rules between fields that every off-policy config shares: a batch that fits the
    buffer, and a warm-up that covers one batch and ends before the step budget."""
    if config.batch_size > config.buffer_size:
        fail("batch_size", config.batch_size, f"is larger than buffer_size={config.buffer_size}",
             "lower batch_size or raise buffer_size")
    if config.learning_starts < config.batch_size:
        fail("learning_starts", config.learning_starts,
             f"is smaller than batch_size={config.batch_size}",
             "collect at least one batch of transitions before the first update")
    if config.learning_starts >= config.total_steps:
        fail("learning_starts", config.learning_starts,
             f"is not below total_steps={config.total_steps}, so no update would ever run",
             "lower learning_starts or raise total_steps")


def check_state(owner: str, state: Any, capacity: int, stores: dict[str, Any],
                probes: dict[str, Callable[[Any], Any]]) -> int:
    """Refuse a ``state`` unlike ``state_dict()``'s before anything changes: ``size`` rows of
    each of ``stores`` as torch tensors, states that ``probes`` accept. Returns ``size``."""
    fix = "pass what state_dict() returned (its rows as torch tensors)"
    require_instance(owner, "state", state, dict, fix)
    if missing := [k for k in ("capacity", "pos", "size", *stores, *probes) if k not in state]:
        fail("state", list(state), f"lacks {missing} (another kind of buffer saved it)",
             "resume with the config that wrote the checkpoint")
    if state["capacity"] != capacity:
        raise ValueError(
            f"the checkpoint's replay buffer has capacity {state['capacity']}, this run's "
            f"buffer_size is {capacity}. Fix: set buffer_size={state['capacity']}, or resume "
            f"from a checkpoint saved with checkpoint_buffer=False.")
    n = check_value("state['size']", state["size"], int_rule(0, capacity, fix=fix))
    check_value("state['pos']", state["pos"], int_rule(0, capacity - 1, fix=fix))
    for name, store in stores.items():
        rows, row = state[name], tuple(store.shape[1:])
        require_instance(owner, f"state[{name!r}]", rows, torch.Tensor, fix)
        if tuple(rows.shape[:1]) != (n,) or rows.numel() != n * int(np.prod(row)):
            fail(f"state[{name!r}].shape", tuple(rows.shape), f"is not {n} rows of {row}", fix)
    for key, probe in probes.items():
        try:
            probe(state[key])
        except (TypeError, ValueError, KeyError, RuntimeError) as error:
            fail(f"state[{key!r}]", state[key], f"is not a generator state ({error})", fix)
    return n


class ReplayBuffer:
    """Fixed-capacity ring buffer: once full, each new transition overwrites the oldest.

    Storage is allocated once, so ``add`` and ``sample`` never allocate per transition and
    sampling is O(batch size), unlike indexing into a ``deque``.

    Args:
        capacity: Maximum number of transitions kept.
        obs_dim: A flat float32 observation's size, or an :class:`~rlkit.core.spaces.ObsSpec`
            (frames are kept in their own dtype: a uint8 frame costs one byte per value).
        action_dim: ``None`` for a discrete action (stored as one int64); otherwise the size of
            a continuous action vector (stored as float32).
        seed: Seed of the buffer's own sampling RNG.
        n_step: Store :class:`rlkit.core.types.NStepBatch` transitions (each with its own bootstrap
            factor ``discounts = gamma ** k``) and sample them as such; ``False``: plain
            one-step :class:`Batch` transitions.
    """

    def __init__(self, capacity: int, obs_dim: int | ObsSpec, action_dim: int | None = None,
                 seed: int = 0, n_step: bool = False) -> None:
        spec = check_sizes(capacity, obs_dim, action_dim, seed)
        check_value("n_step", n_step, Rule("flag", fix="pass True or False"))
        self.capacity, self.obs_spec, self.action_dim = capacity, spec, action_dim
        self.obs = np.zeros((capacity, *spec.shape), dtype=spec.dtype)
        self.next_obs = np.zeros((capacity, *spec.shape), dtype=spec.dtype)
        self.actions = (np.zeros((capacity,), dtype=np.int64) if action_dim is None
                        else np.zeros((capacity, action_dim), dtype=np.float32))
        self.rewards = np.zeros((capacity,), dtype=np.float32)
        self.terminations = np.zeros((capacity,), dtype=np.float32)
        self.n_step = n_step
        self.fields = _FIELDS + (("discounts",) if n_step else ())
        if n_step:
            self.discounts = np.zeros((capacity,), dtype=np.float32)
        self.pos = 0  # index the next transition is written to
        self.size = 0  # number of valid transitions
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, action: int | np.ndarray, reward: float,
            next_obs: np.ndarray, terminated: bool) -> None:
        """Store one transition. ``terminated`` must be False for a time-limit truncation."""
        check_transition(self.obs.shape[1:], self.actions.shape[1:], self.action_dim is None,
                         obs, action, reward, next_obs, terminated)
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
        n = check_batch("ReplayBuffer.add_batch", batch, NStepBatch if self.n_step else Batch,
                        [getattr(self, name).shape[1:] for name in self.fields],
                        self.action_dim is None, "pass an NStepBatch if n_step=True, else a Batch",
                        self.obs.dtype)
        if n == 0:
            return
        skip, slots, self.pos = ring_slots(self.pos, n, self.capacity)
        for name, values in zip(self.fields, batch):
            getattr(self, name)[slots] = np.asarray(values)[skip:]
        self.size = min(self.size + n, self.capacity)

    def state_dict(self) -> dict[str, Any]:
        """The stored transitions, the write position and the sampling RNG, as torch tensors
        and plain Python values (what a checkpoint file may hold; see
        :mod:`rlkit.train.checkpoint`)."""
        n = self.size
        return {"capacity": self.capacity, "pos": self.pos, "size": n,
                **{name: torch.from_numpy(getattr(self, name)[:n].copy())
                   for name in self.fields},
                "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved into a buffer of the same capacity and sizes."""
        spare = type(self.rng.bit_generator)()
        n = check_state("ReplayBuffer.load_state_dict", state, self.capacity,
                        {name: getattr(self, name) for name in self.fields},
                        {"rng": lambda value: setattr(spare, "state", value)})
        for name in self.fields:
            store = getattr(self, name)
            store[:n] = state[name].cpu().numpy().reshape((n, *store.shape[1:]))
        self.pos, self.size = state["pos"], n
        self.rng.bit_generator.state = state["rng"]

    def sample(self, batch_size: int) -> Batch | NStepBatch:
        """Draw ``batch_size`` transitions uniformly, with replacement.

        Returns:
            A :class:`Batch` (an :class:`NStepBatch` for an n-step buffer) of copies (the
            buffer may overwrite its rows afterwards).

        Raises:
            ValueError: if the buffer is empty or ``batch_size`` is not an int >= 1.
        """
        check_value("batch_size", batch_size, BATCH_SIZE)
        if self.size == 0:
            raise ValueError(f"cannot sample batch_size={batch_size} from an empty ReplayBuffer. "
                             "Fix: add transitions first (learning_starts >= batch_size).")
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
        check_sizes(capacity, obs_dim, action_dim, seed, device, discrete=False)
        self.device = torch.device(device)
        self.capacity = capacity
        f32 = dict(dtype=torch.float32, device=self.device)
        self.obs = torch.zeros((capacity, obs_dim), **f32)
        self.next_obs = torch.zeros((capacity, obs_dim), **f32)
        self.actions = torch.zeros((capacity, action_dim), **f32)
        self.rewards = torch.zeros((capacity,), **f32)
        self.terminations = torch.zeros((capacity,), **f32)
        self.pos = self.size = 0
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def __len__(self) -> int:
        return self.size

    def add_batch(self, batch: Batch) -> None:
        """Copy ``len(batch)`` numpy transitions to the device, wrapping around the ring."""
        n = check_batch("TensorReplayBuffer.add_batch", batch, Batch,
                        [getattr(self, name).shape[1:] for name in _FIELDS])
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
        kind, spare = self.device.type, torch.Generator(device=self.device)
        same_kind = isinstance(state, dict) and state.get("generator_device", kind) == kind
        n = check_state("TensorReplayBuffer.load_state_dict", state, self.capacity,
                        {name: getattr(self, name) for name in _FIELDS},
                        {"generator": spare.set_state if same_kind else lambda saved: None})
        for name in _FIELDS:
            store = getattr(self, name)
            store[:n] = state[name].reshape((n, *store.shape[1:])).to(store.dtype).to(self.device)
        self.pos, self.size = state["pos"], n
        if same_kind:
            self.generator.set_state(state["generator"])
        else:
            self.generator.manual_seed(n)

    def sample(self, batch_size: int) -> TensorBatch:
        """``batch_size`` transitions drawn uniformly with replacement, on the device."""
        check_value("batch_size", batch_size, BATCH_SIZE)
        if self.size == 0:
            raise ValueError(f"cannot sample batch_size={batch_size} from an empty "
                             "TensorReplayBuffer. Fix: add transitions first (learning_starts "
                             ">= batch_size).")
        idx = torch.randint(0, self.size, (batch_size,), device=self.device,
                            generator=self.generator)
        return TensorBatch(self.obs[idx], self.actions[idx], self.rewards[idx],
                           self.next_obs[idx], self.terminations[idx])
