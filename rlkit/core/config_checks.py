"""Validation helpers shared by the algorithm configs: every error names the field and the fix."""

from __future__ import annotations

import math
from typing import Any


def fail(field: str, value: Any, rule: str, fix: str) -> None:
    """Raise ``ValueError("<field>=<value> <rule>. Fix: <fix>.")``."""
    raise ValueError(f"{field}={value!r} {rule}. Fix: {fix}.")


def require_ints(config: Any, names: tuple[str, ...], minimum: int) -> None:
    """Each named field must be an ``int`` (not a bool) and at least ``minimum``."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            fail(name, value, f"must be an int >= {minimum}", f"set {name} to an int >= {minimum}")


def require_positive_finite(config: Any, names: tuple[str, ...], example: str) -> None:
    """Each named field must be a finite number > 0."""
    for name in names:
        value = getattr(config, name)
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            fail(name, value, "must be a finite number > 0", f"use e.g. {name}={example}")


def require_hidden(config: Any) -> None:
    """``config.hidden`` must be a non-empty tuple of positive ints."""
    hidden = config.hidden
    if not hidden or any(not isinstance(h, int) or isinstance(h, bool) or h < 1 for h in hidden):
        fail("hidden", hidden, "must be a non-empty tuple of positive ints", "use e.g. (256, 256)")


def require_replay_settings(config: Any) -> None:
    """The checks every off-policy config shares: a discount in [0, 1), a batch that fits the
    buffer, and a warm-up that covers one batch and ends before the step budget."""
    if not 0 <= config.gamma < 1:
        fail("gamma", config.gamma, "must be in [0, 1)", "use a discount such as 0.99")
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
