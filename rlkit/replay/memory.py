"""How much memory a replay takes, counted before anything is allocated, and the check that
refuses one that would not fit (in the driver, before any actor starts)."""

from __future__ import annotations

import torch

from rlkit.core.spaces import ObsSpec, as_obs_spec
from rlkit.replay.sum_tree import tree_level_sizes

#: Bytes above which ReplayBuffer refuses to allocate unless told otherwise (8 GiB).
MAX_BUFFER_BYTES = 8 * 2**30


def replay_bytes(capacity: int, obs: int | ObsSpec, action_dim: int | None,
                 prioritized: bool = False) -> int:
    """Bytes of a replay of ``capacity`` transitions: obs and next_obs (a vector's ``obs_dim``
    float32, or an :class:`~rlkit.core.spaces.ObsSpec`'s bytes: a uint8 frame's one byte per
    value), the action (int64, or ``action_dim`` float32), reward and termination (float32); a
    prioritized one adds its discounts column and its sum and min trees (float64, every
    level)."""
    per_item = 2 * as_obs_spec(obs).nbytes + 8 + (8 if action_dim is None else 4 * action_dim)
    total = int(capacity) * per_item
    if prioritized:
        total += 4 * int(capacity) + 2 * 8 * sum(tree_level_sizes(int(capacity)))
    return total


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


def check_buffer_memory(capacity: int, obs: int | ObsSpec, action_dim: int | None,
                        device: str | torch.device = "cpu", nbytes: int | None = None,
                        what: str = "", free: int | None = None, where: str = "") -> int:
    """Estimate a buffer's bytes *before* allocating it (or take ``nbytes``, everything the
    replay holds, ``what`` saying so); refuse one that would not fit.

    The limit is :data:`MAX_BUFFER_BYTES` or 80% of the memory free on ``device`` (or ``free``
    bytes, measured ``where`` the buffer will live: the learner's node), whichever is smaller.
    Returns the estimate.

    Raises:
        ValueError: naming ``buffer_size`` and the largest capacity that would fit.
    """
    nbytes = replay_bytes(capacity, obs, action_dim) if nbytes is None else nbytes
    free = free_memory_bytes(device) if free is None else free
    limit = MAX_BUFFER_BYTES if free is None else min(MAX_BUFFER_BYTES, int(0.8 * free))
    if nbytes > limit:
        per_item = max(1, nbytes // max(1, capacity))
        raise ValueError(
            f"buffer_size={capacity}{what} would need {nbytes / 2**30:.1f} GiB on {device}{where}, "
            f"more than the {limit / 2**30:.1f} GiB allowed (80% of free memory, at most "
            f"{MAX_BUFFER_BYTES / 2**30:.0f} GiB). Fix: use buffer_size <= {limit // per_item}.")
    return nbytes
