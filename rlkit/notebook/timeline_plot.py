"""Draw a run's timeline (:mod:`rlkit.core.timeline`): one lane per role, a bar per call, the
driver's own work on a lane of its own, and a table of busy fractions."""

from __future__ import annotations

import re
from collections.abc import Sequence

import matplotlib.pyplot as plt

from rlkit.core.timeline import DRIVER, Span, busy_seconds


def lane_order(roles: set[str]) -> list[str]:
    """The driver first, then the learner ranks, then the other roles by name, workers last,
    each group in numeric order (``worker 2`` before ``worker 10``)."""

    def key(role: str) -> tuple[int, str, int]:
        group = (0 if role == DRIVER else 1 if role.startswith("learner")
                 else 3 if role.startswith("worker") else 2)
        number = re.search(r"(\d+)$", role)
        return group, role.rstrip("0123456789"), int(number.group(1)) if number else -1

    return sorted(roles, key=key)


def busy_fractions(timeline: Sequence[Span], wall_seconds: float) -> dict[str, float]:
    """``{role: share of wall_seconds its spans cover}``, lanes in :func:`lane_order`; an
    unfinished call counts up to ``wall_seconds``."""
    busy = busy_seconds(timeline, until=wall_seconds)
    return {role: busy[role] / wall_seconds for role in lane_order(set(busy))}


def plot_timeline(timeline: Sequence[Span], wall_seconds: float, start: float = 0.0,
                  end: float | None = None, title: str | None = None,
                  ax: plt.Axes | None = None) -> plt.Axes:
    """One lane per role (:func:`lane_order`), a bar per call from launch to answer; calls
    still in flight at the end are hatched up to ``wall_seconds``. ``start``/``end`` zoom into
    a window of the run's clock (a whole run's thousands of calls blur into one bar)."""
    roles = lane_order({span.role for span in timeline})
    end = wall_seconds if end is None else end
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.9 + 0.32 * len(roles)))
    for lane, role in enumerate(roles):
        spans = [s for s in timeline if s.role == role]
        done = [(s.start, s.end - s.start) for s in spans if s.end is not None]
        open_ = [(s.start, wall_seconds - s.start) for s in spans if s.end is None]
        color = "0.35" if role == DRIVER else f"C{lane % 10}"
        ax.broken_barh(done, (lane - 0.35, 0.7), facecolors=color, alpha=0.8, linewidth=0)
        if open_:
            ax.broken_barh(open_, (lane - 0.35, 0.7), facecolors="none", edgecolors=color,
                           hatch="//", linewidth=0.5)
    ax.set_yticks(range(len(roles)), roles, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(start, end)
    ax.set_xlabel("seconds of training (the run's clock)")
    ax.grid(axis="x", alpha=0.3)
    if title:
        ax.set_title(title)
    return ax
