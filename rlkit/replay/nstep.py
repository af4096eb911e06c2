"""N-step transitions, built in the rollout worker from its fragments.

A 1-step target ``r_t + gamma * max_a Q(s_{t+1}, a)`` passes a reward back one step per update.
An n-step target passes it back ``n`` steps at once:

    G_t = r_t + gamma r_{t+1} + ... + gamma^{k-1} r_{t+k-1} + gamma^k (1 - term) max_a Q(s_{t+k}, a)

with ``k = n``, unless the episode ended at step ``t + j`` inside the window, in which case
``k = j + 1`` and

* a **termination** sets ``term = 1``: the state after it has no future, nothing to bootstrap;
* a **truncation** (time limit) keeps ``term = 0`` and bootstraps from the real final
  observation the env returned, ``s_{t+k}``, not from the next episode's first state.

The factor ``gamma ** k`` travels with each transition (``NStepBatch.discounts``), so the
learner needs no ``n``. The target is off-policy only approximately: the ``k - 1`` actions after
the first were chosen by the behaviour policy. Ape-X accepts this bias for faster credit
assignment (and so do we: notebook 04's ablation compares n = 1 and n = 3).

Windows may cross the end of a fragment: the builder keeps the last ``n - 1`` steps of each env
and finishes their windows with the next fragment, so no transition is cut short at a fragment
boundary.

The checks of the transitions every replay structure takes live here too: :func:`check_batch`
(a batch's type, fields, row shapes and dtypes, without a pass over the data) and
:func:`check_transition` (one transition).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlkit.core.types import Batch, NStepBatch
from rlkit.core.validation import (COUNT, Rule, check_value, fail, int_rule, number_rule,
                                   require_instance)
from rlkit.replay.sum_tree import number_array

NUMPY_FIX = "pass numpy arrays, as a rollout's Fragment.batch holds (tensor.cpu().numpy())"
ACTION_INDEX = int_rule(0, example=1, meaning="an action index")
REWARD = number_rule(example=1.0)
TERMINATED = Rule("flag", fix="pass True or False (False for a time-limit truncation)")


def check_batch(owner: str, batch: Any, kind: type, rows: Any = None,
                int_actions: bool = False, fix: str = "", obs_dtype: Any = None) -> int:
    """Refuse a ``batch`` of transitions (for ``owner``, the method called) that is not a
    ``kind`` of numeric numpy arrays, one row per transition, of the row shapes ``rows`` (one
    per field; ``None``: any, ``next_obs`` like ``obs``), with int actions if ``int_actions``,
    and with integer observations if ``obs_dtype`` (the store's) is an integer one: a float
    copy of a frame would be truncated into it. O(fields): no pass over the data. Returns
    ``len(batch)``."""
    require_instance(owner, "batch", batch, kind,
                     fix or f"pass a {kind.__name__} of numpy arrays")
    for name, values in zip(kind._fields, batch):
        require_instance(owner, f"batch.{name}", values, np.ndarray, NUMPY_FIX)
    n = batch.obs.shape[0] if batch.obs.ndim else 0
    if rows is None:
        obs_row = batch.obs.shape[1:]
        rows = (obs_row, batch.actions.shape[1:], (), obs_row, *[()] * (len(kind._fields) - 4))
    for name, values, row in zip(kind._fields, batch, rows):
        if values.shape != (n, *row):
            fail(f"batch.{name}.shape", values.shape, f"must be {(n, *row)}, one row per "
                 "transition", "give every field one row per transition, of the sizes the "
                 "buffer was built with (obs_dim, action_dim)")
        ints = int_actions and name == "actions"
        if (name in ("obs", "next_obs") and obs_dtype is not None
                and np.dtype(obs_dtype).kind != "f" and values.dtype.kind == "f"):
            fail(f"batch.{name}.dtype", values.dtype.name, f"is a float copy of frames this "
                 f"buffer keeps as {np.dtype(obs_dtype).name}", "pass the frames as the env "
                 "returned them (the runner's Fragment.batch does)")
        if values.dtype.kind not in ("iu" if ints else "biuf"):
            fail(f"batch.{name}.dtype", values.dtype.name, "must be an int dtype (discrete "
                 "actions are indices)" if ints else "must be a numeric dtype",
                 "pass int64 actions" if ints else "pass float32 arrays")
    return n


def check_transition(obs_row: tuple[int, ...], action_row: tuple[int, ...], discrete: bool,
                     obs: Any, action: Any, reward: Any, next_obs: Any, terminated: Any) -> None:
    """Refuse one transition unless ``obs`` and ``next_obs`` are numbers of shape ``obs_row``,
    ``action`` an int >= 0 (``discrete``) or numbers of shape ``action_row``, ``reward`` a
    finite number and ``terminated`` a bool."""
    for name, value, row in (("obs", obs, obs_row), ("next_obs", next_obs, obs_row),
                             ("action", action, action_row)):
        if name == "action" and discrete:
            check_value("action", action, ACTION_INDEX)
            continue
        try:
            array = np.asarray(value)
        except (TypeError, ValueError, RuntimeError) as error:  # a CUDA tensor, ragged lists
            fail(name, value, f"cannot be read as a numpy array ({error})", NUMPY_FIX)
        if array.shape != row:
            fail(f"{name}.shape", array.shape, f"must be {row}", f"pass one {name}, of shape {row}")
        if array.dtype.kind not in "biuf":
            fail(f"{name}.dtype", array.dtype.name, "must be a numeric dtype", NUMPY_FIX)
    check_value("reward", reward, REWARD)
    check_value("terminated", terminated, TERMINATED)


class NStepBuilder:
    """Turns consecutive fragments of ``N`` envs into n-step transitions, env by env.

    Args:
        n: Steps per window (>= 1; 1 gives plain transitions with ``discounts = gamma``).
        gamma: Discount in ``[0, 1]`` (0: every target is the one reward ``r_t``, as DQN's
            is with ``gamma = 0``).
        num_envs: ``N``, the envs stepped together.
    """

    def __init__(self, n: int, gamma: float, num_envs: int) -> None:
        check_value("n_step", n, int_rule(1, example=3, meaning="1 = one-step targets"))
        check_value("gamma", gamma, number_rule(at_least=0, at_most=1, example=0.99))
        check_value("num_envs", num_envs, COUNT)
        self.n, self.gamma, self.num_envs = n, float(gamma), num_envs
        # per env: its last n-1 steps, their end flags, and whether their windows are unsent
        self._tails: list[tuple[Batch, np.ndarray, np.ndarray] | None] = [None] * num_envs

    def add(self, batch: Batch, ends: np.ndarray,
            env_ids: np.ndarray | None = None) -> NStepBatch:
        """Add the next steps of the envs; return every window that is now complete.

        Args:
            batch: ``M`` transitions (``rlkit.envs.runner.Fragment.batch``); the rows of one env
                are its consecutive steps.
            ends: ``(M,)`` bool, True where the episode ended (terminated or truncated).
            env_ids: ``(M,)`` the env of each row (``Fragment.batch_env_ids``); ``None``: time-major
                rows of all ``N`` envs (rows ``t*N .. t*N + N-1`` are step ``t``).

        Returns:
            The n-step transitions whose window is complete: ``n`` steps long, or cut by an
            episode end, grouped by env. Windows still open (the last ``n - 1`` steps of an
            unfinished episode) are returned by a later call.
        """
        n_env, m = self.num_envs, check_batch("NStepBuilder.add", batch, Batch)
        if env_ids is None:
            if m % n_env:
                fail("len(batch)", m, f"is not a whole number of steps of num_envs={n_env} "
                     "envs", "pass env_ids")
            env_ids = np.tile(np.arange(n_env), m // n_env)
        ends = number_array("ends", ends, "biu", "a bool", "pass one end flag per row (bool)")
        env_ids = number_array("env_ids", env_ids, "iu", "an int", "pass one env index per row")
        for name, values in (("ends", ends), ("env_ids", env_ids)):
            if len(values) != m:
                fail(f"len({name})", len(values), f"differs from the batch's {m} rows",
                     "pass one per row")
        if len(env_ids) and not 0 <= env_ids.min() <= env_ids.max() < n_env:
            raise ValueError(f"env_ids must lie in [0, {n_env}). Fix: build the builder with "
                             "the runner's num_envs.")
        ends = ends.astype(bool, copy=False)
        outputs = [self._add_env(j, Batch(*(np.asarray(a)[env_ids == j] for a in batch)),
                                 ends[env_ids == j]) for j in range(n_env)]
        return NStepBatch(*(np.concatenate(column) for column in zip(*outputs)))

    def state_dict(self) -> dict[str, Any]:
        """The open windows (each env's kept tail) as tensors, for a checkpoint."""
        return {"tails": [None if tail is None else
                          [torch.from_numpy(np.array(a)) for a in (*tail[0], tail[1], tail[2])]
                          for tail in self._tails]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the windows a :meth:`state_dict` held (same ``num_envs``)."""
        tails = state["tails"]
        if len(tails) != self.num_envs:
            fail("num_envs", self.num_envs, f"differs from the saved builder's {len(tails)}",
                 "resume with the same num_envs")
        arrays = [None if t is None else [a.numpy().copy() for a in t] for t in tails]
        self._tails = [None if a is None else (Batch(*a[:-2]), a[-2], a[-1]) for a in arrays]

    def _add_env(self, j: int, steps: Batch, ends: np.ndarray) -> NStepBatch:
        """Env ``j``'s next ``L`` steps (as ``(L, 1)`` columns) after its kept tail."""
        steps = Batch(*(a.reshape(len(ends), 1, *a.shape[1:]) for a in steps))
        ends = ends.reshape(-1, 1)
        fresh = np.ones(ends.shape, dtype=bool)
        if self._tails[j] is not None:
            tail, tail_ends, pending = self._tails[j]
            steps = Batch(*(np.concatenate([old, new]) for old, new in zip(tail, steps)))
            ends = np.concatenate([tail_ends, ends])
            fresh = np.concatenate([pending, fresh])
        out, complete = self._windows(steps, ends)
        emit = (fresh & complete)[:, 0]
        keep = min(self.n - 1, len(ends))
        cut = len(ends) - keep
        self._tails[j] = (Batch(*(a[cut:] for a in steps)), ends[cut:],
                          (fresh & ~complete)[cut:])
        return NStepBatch(*(a[:, 0][emit] for a in out))

    def _windows(self, steps: Batch, ends: np.ndarray) -> tuple[NStepBatch, np.ndarray]:
        """The window starting at every step ``(L, N)`` and whether it is complete."""
        length = len(ends)
        rewards = np.zeros(ends.shape, dtype=np.float64)
        next_obs = steps.next_obs.copy()
        terms = np.zeros(ends.shape, dtype=np.float32)
        taken = np.zeros(ends.shape, dtype=np.int64)  # k: steps inside each window
        open_ = np.ones(ends.shape, dtype=bool)  # window still running at step j
        cut = np.zeros(ends.shape, dtype=bool)  # window ended by an episode end
        for j in range(self.n):
            rows = np.arange(length) + j
            inside = rows < length
            rows = np.minimum(rows, length - 1)
            use = open_ & inside[:, None]
            rewards += np.where(use, self.gamma**j * steps.rewards[rows], 0.0)
            per_value = use.reshape(use.shape + (1,) * (next_obs.ndim - use.ndim))  # any obs
            next_obs = np.where(per_value, steps.next_obs[rows], next_obs)  # (its dtype kept)
            terms = np.where(use, steps.terminations[rows], terms)
            taken = np.where(use, j + 1, taken)
            cut |= use & ends[rows]
            open_ = use & ~ends[rows]
        complete = (taken == self.n) | cut
        discounts = (self.gamma ** taken).astype(np.float32)
        out = NStepBatch(steps.obs, steps.actions, rewards.astype(np.float32), next_obs, terms,
                         discounts)
        return out, complete


class FragmentTransitions:
    """What a rollout stores from each fragment, given a config's ``n_step`` (1 if it has none).

    Called with a :class:`rlkit.envs.runner.Fragment`, it returns the fragment's own one-step
    ``Batch`` when ``n_step == 1``, otherwise the n-step transitions completed so far by an
    :class:`NStepBuilder` that it keeps (so call it with consecutive fragments of the same
    ``num_envs`` environments; :meth:`state_dict` saves the windows still open).
    """

    def __init__(self, config: Any, num_envs: int) -> None:
        n_step = getattr(config, "n_step", 1)
        self.builder = None if n_step == 1 else NStepBuilder(n_step, config.gamma, num_envs)

    def __call__(self, fragment: Any) -> Batch | NStepBatch:
        if self.builder is None:
            return fragment.batch
        return self.builder.add(fragment.batch, fragment.batch_ends, fragment.batch_env_ids)

    def state_dict(self) -> dict[str, Any]:
        return {} if self.builder is None else self.builder.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.builder is not None:
            self.builder.load_state_dict(state)
