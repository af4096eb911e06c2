"""Inline plots: reward curves against env steps or wall-clock seconds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import matplotlib.pyplot as plt
import numpy as np

from rlkit.core.metrics import History
from rlkit.core.validation import COUNT, check_value, fail

XAxis = Literal["steps", "seconds"]


def moving_average(values: list[float], window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` values: same length as ``values``."""
    check_value("window", window, COUNT)
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return x
    csum = np.cumsum(np.insert(x, 0, 0.0))
    idx = np.arange(1, x.size + 1)
    lo = np.maximum(idx - window, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


def plot_reward_curves(histories: Mapping[str, History], x: XAxis = "steps",
                       target: float | None = None, window: int = 20,
                       title: str | None = None, ax: plt.Axes | None = None,
                       evaluation: str = "greedy") -> plt.Axes:
    """Draw training returns (faint, plus a moving average) and evaluation points.

    Args:
        histories: Label -> :class:`History`; one colour per run.
        x: ``"steps"`` (env steps) or ``"seconds"`` (wall-clock) on the x axis.
        target: A horizontal line at the return that counts as solved.
        window: Episodes in the moving average.
        title: Axes title.
        ax: Axes to draw on (a new figure if ``None``).
        evaluation: How the evaluations act, for the legend: ``"greedy"`` (the best action of
            a discrete policy) or ``"deterministic"`` (the mean action of a continuous one).
    """
    if x not in ("steps", "seconds"):
        fail("x", x, "is not an axis plot_reward_curves draws", 'pass x="steps" (env steps) or '
             'x="seconds" (wall-clock seconds)')
    if evaluation not in ("greedy", "deterministic"):
        fail("evaluation", evaluation, "is not a kind of evaluation", 'pass "greedy" (a '
             'discrete policy\'s best action) or "deterministic" (a continuous policy\'s mean)')
    check_value("window", window, COUNT)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    for i, (label, h) in enumerate(histories.items()):
        color = f"C{i}"
        ex = h.episode_steps if x == "steps" else h.episode_seconds
        vx = h.eval_steps if x == "steps" else h.eval_seconds
        if ex:
            ax.plot(ex, h.episode_returns, color=color, alpha=0.2, lw=0.8)
            ax.plot(ex, moving_average(h.episode_returns, window), color=color, lw=1.5,
                    label=f"{label}: training (mean of {window})")
        if vx:
            ax.errorbar(vx, h.eval_returns, yerr=h.eval_stds, fmt="o", color=color, ms=4,
                        capsize=2, label=f"{label}: {evaluation} eval")
    if target is not None:
        ax.axhline(target, color="k", ls="--", lw=1, label=f"solved ({target:g})")
    ax.set_xlabel("env steps" if x == "steps" else "wall-clock seconds")
    ax.set_ylabel("episode return")
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    legend_below(ax)
    return ax


def legend_below(ax: plt.Axes, ncol: int = 2) -> None:
    """The axes' legend under its x label: reward curves fill the plot area, and a legend
    inside it would cover points or the target line. Call it again after adding a line."""
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=ncol,
              frameon=False)
