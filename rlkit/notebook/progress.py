"""A progress bar for training loops that ends green when the run reaches its target.

In a notebook the bar is plain HTML, redrawn in place through a display handle. Unlike a
widget (tqdm's notebook bar), it needs no widget model: a saved notebook reopened later shows
the bar as it ended instead of "Error displaying widget: model not found", and the kernel runs
no widget traffic while training. In a terminal it is a tqdm text bar.

End states: a run that solved (or used its whole budget) ends with a full green bar and its
final postfix (the solving evaluation included); a run stopped short (interrupted, or failed)
ends red at the step it reached.
"""

from __future__ import annotations

import html
import math
import time
from typing import Any

COLORS = {"running": "#1f77b4", "done": "#2ca02c", "stopped": "#d62728"}
#: Least seconds between two redraws of a running bar (each one is a message to the front end;
#: the distributed drivers report many fragments a second). The end state is always drawn.
MIN_REDRAW_S = 0.1


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (where HTML output is rendered)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def bar_html(desc: str, n: int, total: int, seconds: float, postfix: dict[str, str],
             state: str) -> str:
    """The bar as HTML: ``state`` is ``"running"``, ``"done"`` (full and green: solved, or
    the budget used up) or ``"stopped"`` (red, at the fraction reached)."""
    if state not in COLORS:
        raise ValueError(f"state={state!r} must be one of {sorted(COLORS)}.")
    fraction = 1.0 if state == "done" else min(1.0, n / max(total, 1))
    rate = f", {n / seconds:,.0f} steps/s" if seconds > 0 and n > 0 else ""
    ending = {"running": "", "done": " (solved)" if n < total else "",
              "stopped": " (stopped)"}[state]
    extra = "  ".join(f"{k}={v}" for k, v in postfix.items())
    text = (f"{desc}: {n:,} / {total:,} env steps{ending}, {seconds:.1f} s{rate}"
            f"{'  ' + extra if extra else ''}")
    return ('<div class="rlkit-progress" data-state="{state}" style="font-family: monospace; '
            'font-size: 12px; margin: 2px 0">'
            '<div style="background: #e6e6e6; width: 100%; max-width: 640px; height: 10px; '
            'border-radius: 3px">'
            '<div style="background: {color}; width: {pct:.1f}%; height: 10px; '
            'border-radius: 3px"></div></div>{text}</div>').format(
                state=state, color=COLORS[state], pct=100 * fraction, text=html.escape(text))


class ProgressBar:
    """A bar over env steps, or nothing when ``enabled`` is false.

    Args:
        enabled: Show a bar.
        total: The step budget.
        initial: Steps already taken (a resumed run).
        desc: The label (the algorithm's name).
    """

    def __init__(self, enabled: bool, total: int, initial: int, desc: str) -> None:
        self.total, self.n, self.desc = total, initial, desc
        self.postfix: dict[str, str] = {}
        self.start = time.perf_counter()
        self.handle: Any = None  # the notebook's display handle
        self.drawn_at = -math.inf  # when the handle was last redrawn
        self.text_bar: Any = None  # tqdm, in a terminal
        if enabled and in_notebook():
            from IPython.display import HTML, display

            self.handle = display(HTML(self.html("running")), display_id=True)
            self.drawn_at = time.perf_counter()
        elif enabled:
            from tqdm import tqdm

            self.text_bar = tqdm(total=total, initial=initial, unit="step", desc=desc)

    def html(self, state: str) -> str:
        return bar_html(self.desc, self.n, self.total, time.perf_counter() - self.start,
                        self.postfix, state)

    def update(self, step: int, **postfix: str) -> None:
        """Move the bar to ``step`` env steps and show ``postfix`` (e.g. ``eval="475"``)."""
        self.postfix.update(postfix)
        if self.text_bar is not None:
            self.text_bar.update(step - self.n)
            self.text_bar.set_postfix(self.postfix, refresh=False)
        self.n = step
        now = time.perf_counter()
        if self.handle is not None and now - self.drawn_at >= MIN_REDRAW_S:
            from IPython.display import HTML

            self.handle.update(HTML(self.html("running")))
            self.drawn_at = now

    def close(self, solved: bool = False, **postfix: str) -> None:
        """Draw the end state: green if ``solved`` or the budget is used up, red otherwise;
        ``postfix`` updates the shown values (the final evaluation)."""
        self.postfix.update(postfix)
        done = solved or self.n >= self.total
        if self.handle is not None:
            from IPython.display import HTML

            self.handle.update(HTML(self.html("done" if done else "stopped")))
            self.handle = None
        if self.text_bar is not None:
            if done:
                self.text_bar.total = self.text_bar.n
                self.text_bar.refresh()
            self.text_bar.close()
            self.text_bar = None
