"""N-step transitions, built in the rollout worker from its time-major fragments.

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
"""

from __future__ import annotations

import numpy as np

from rlkit.types import Batch, NStepBatch


class NStepBuilder:
    """Turns consecutive time-major fragments of ``N`` envs into n-step transitions.

    Args:
        n: Steps per window (>= 1; 1 gives plain transitions with ``discounts = gamma``).
        gamma: Discount in ``(0, 1]``.
        num_envs: ``N``, the envs stepped together (rows ``t*N .. t*N + N-1`` are step ``t``).
    """

    def __init__(self, n: int, gamma: float, num_envs: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n_step={n!r} must be an int >= 1 (1 = one-step targets). "
                             "Fix: use n_step=3, the Ape-X value.")
        if not 0 < gamma <= 1:
            raise ValueError(f"gamma={gamma!r} must be in (0, 1]. Fix: use gamma=0.99.")
        self.n, self.gamma, self.num_envs = n, float(gamma), num_envs
        self._tail: tuple[Batch, np.ndarray] | None = None  # last n-1 steps, (m, N, ...)
        self._pending = np.zeros((0, num_envs), dtype=bool)  # their windows not yet emitted

    def add(self, batch: Batch, ends: np.ndarray) -> NStepBatch:
        """Add ``T`` steps of every env; return every window that is now complete.

        Args:
            batch: ``T * N`` time-major transitions (``rlkit.rollout.Fragment.batch``).
            ends: ``(T * N,)`` bool, True where the episode ended (terminated or truncated).

        Returns:
            The n-step transitions whose window is complete: ``n`` steps long, or cut by an
            episode end. Windows still open (the last ``n - 1`` steps of an unfinished
            episode) are returned by a later call.
        """
        n_env = self.num_envs
        if len(batch) % n_env or len(ends) != len(batch):
            raise ValueError(f"a fragment of {len(batch)} rows with {len(ends)} end flags does "
                             f"not hold whole steps of {n_env} envs.")
        steps = Batch(*(np.asarray(a).reshape(-1, n_env, *np.shape(a)[1:]) for a in batch))
        ends = np.asarray(ends, dtype=bool).reshape(-1, n_env)
        fresh = np.ones(ends.shape, dtype=bool)
        if self._tail is not None:
            tail, tail_ends = self._tail
            steps = Batch(*(np.concatenate([old, new]) for old, new in zip(tail, steps)))
            ends = np.concatenate([tail_ends, ends])
            fresh = np.concatenate([self._pending, fresh])
        out, complete = self._windows(steps, ends)
        emit = fresh & complete
        keep = min(self.n - 1, len(ends))
        self._tail = (Batch(*(a[len(ends) - keep:] for a in steps)), ends[len(ends) - keep:])
        self._pending = (fresh & ~complete)[len(ends) - keep:]
        return NStepBatch(*(a[emit] for a in out))

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
            next_obs = np.where(use[..., None], steps.next_obs[rows], next_obs)
            terms = np.where(use, steps.terminations[rows], terms)
            taken = np.where(use, j + 1, taken)
            cut |= use & ends[rows]
            open_ = use & ~ends[rows]
        complete = (taken == self.n) | cut
        discounts = (self.gamma ** taken).astype(np.float32)
        out = NStepBatch(steps.obs, steps.actions, rewards.astype(np.float32), next_obs, terms,
                         discounts)
        return out, complete
