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
