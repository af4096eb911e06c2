"""A progress bar for training loops that ends green when the run reaches its target."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """A tqdm bar over env steps, or nothing when ``enabled`` is false.

    tqdm's notebook bar turns red when it is closed short of its total, which is what an early
    stop looks like; :meth:`close` with ``solved=True`` first sets the total to the steps
    taken, so a solved run ends green with its final postfix, and an interrupted or failed run
    stays red.
    """

    def __init__(self, enabled: bool, total: int, initial: int, desc: str) -> None:
        self.bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", desc=desc)

    def update(self, step: int, **postfix: str) -> None:
        """Move the bar to ``step`` env steps and show ``postfix`` (e.g. ``eval="475"``)."""
        if self.bar is not None:
            self.bar.update(step - self.bar.n)
            self.bar.set_postfix(postfix, refresh=False)

    def close(self, solved: bool = False) -> None:
        if self.bar is None:
            return
        if solved:
            self.bar.total = self.bar.n
            container = getattr(self.bar, "container", None)  # the notebook widget, if any
            if container is not None:
                container.children[1].max = self.bar.n
            self.bar.refresh()
        self.bar.close()
