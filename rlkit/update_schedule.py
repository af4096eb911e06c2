"""How many gradient updates a run owes after a number of env steps: the rate limiter's rule,
shared by the single-process loop and the Ray driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlkit.checkpoint import Checkpoint


def updates_due(env_steps: int, learning_starts: int, train_every: int) -> int:
    """Gradient updates a run should have done after ``env_steps`` env steps.

    The single-process loop updates at every multiple of ``train_every`` that is past
    ``learning_starts``; this is the number of such multiples up to ``env_steps``, so both
    versions train at the same update-to-data ratio, whatever the two numbers are.
    """
    return max(0, env_steps // train_every - learning_starts // train_every)


def resumed_updates_due(env_steps: int, start: Checkpoint | None, learning_starts: int,
                        train_every: int) -> int:
    """Gradient updates a (possibly resumed) run should have done after ``env_steps`` steps.

    A fresh run (``start is None``): :func:`updates_due`. A resumed run continues from the
    checkpoint's update count; if the checkpoint kept the replay buffer it goes on at the same
    rate at once, otherwise it first refills ``learning_starts`` new transitions, as a fresh run
    would.
    """
    if start is None:
        return updates_due(env_steps, learning_starts, train_every)
    if start.buffer is not None:
        return (start.updates + updates_due(env_steps, learning_starts, train_every)
                - updates_due(start.env_steps, learning_starts, train_every))
    return start.updates + updates_due(env_steps - start.env_steps, learning_starts, train_every)
