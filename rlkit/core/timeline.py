"""A run's timeline: when each role was busy with a call the driver made, and when the driver
itself handled what came back. Recorded by the driver skeleton
(:class:`~rlkit.distributed.runtime.driver.DriverRun`) for every pattern, in the run's own clock
(seconds of training, as ``History``), and returned as ``RunResult.timeline``.

A span of a role runs from the moment the driver launched the call to the moment it took the
answer: the role's work plus the time the answer waited for the driver (a call's own start is
not visible from the driver). Spans of one role can overlap (two learner calls in flight); its
busy time is the union of its spans (:func:`busy_seconds`).

Memory: a span is a small tuple, 124 bytes with its floats (measured; the role and handler names
are shared strings), two per event. A run keeps its most recent :data:`MAX_SPANS` spans, 31 MB at
most; a longer run's timeline starts later (``TimelineRecorder.discarded`` counts what went).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import NamedTuple

#: The spans a run keeps, the most recent (an Ape-X run of 100k events makes 200k).
MAX_SPANS = 250_000

#: The lane of the driver's own work (handling an answer, scheduling what is due).
DRIVER = "driver"


class Span(NamedTuple):
    """One call of ``role`` (``what``: the handler that took its answer), from ``start`` to
    ``end`` in seconds of the run's clock; ``end`` is ``None`` for a call still in flight when
    the run ended."""

    role: str
    what: str
    start: float
    end: float | None


class TimelineRecorder:
    """Collects the spans of one run: :meth:`launched` when a call goes out, :meth:`answered`
    when its answer is taken, :meth:`handled` around the driver's own work."""

    def __init__(self, clock: Callable[[], float], max_spans: int = MAX_SPANS) -> None:
        self.clock = clock
        self.spans: deque[Span] = deque(maxlen=max_spans)
        self.closed = 0  # spans closed so far; those past max_spans were discarded
        self.open: dict[Hashable, tuple[str, str, float]] = {}

    def launched(self, ref: Hashable, role: str, what: str) -> None:
        self.open[ref] = (role, what, self.clock())

    def answered(self, ref: Hashable) -> float:
        """Close the span of ``ref``; returns the time (the driver's work starts there)."""
        now = self.clock()
        if ref in self.open:
            role, what, start = self.open.pop(ref)
            self._keep(Span(role, what, start, now))
        return now

    def dropped(self, roles: Collection[str], at: float) -> None:
        """Close the spans of every call of ``roles`` still open, given up on at ``at`` (a
        learner group's calls in flight when it restarts): each ends there, marked
        ``" (dropped)"``, so the restart shows as a gap, not as calls in flight forever."""
        for ref, (role, what, start) in list(self.open.items()):
            if role in roles:
                del self.open[ref]
                self._keep(Span(role, f"{what} (dropped)", start, at))

    def handled(self, what: str, start: float) -> None:
        self._keep(Span(DRIVER, what, start, self.clock()))

    def _keep(self, span: Span) -> None:
        self.closed += 1
        self.spans.append(span)

    @property
    def discarded(self) -> int:
        """Closed spans no longer kept (the oldest, past ``max_spans``)."""
        return self.closed - len(self.spans)

    def timeline(self) -> list[Span]:
        """Every span by start time, the calls still in flight last seen with ``end=None``."""
        unfinished = [Span(role, what, start, None) for role, what, start in self.open.values()]
        return sorted([*self.spans, *unfinished], key=lambda span: span.start)


class NoTimeline(TimelineRecorder):
    """Records nothing (a run with ``timeline=False``: the overhead benchmark's control);
    :meth:`answered` still returns the time, which the driver's loop uses."""

    def launched(self, ref: Hashable, role: str, what: str) -> None:
        pass

    def answered(self, ref: Hashable) -> float:
        return self.clock()

    def dropped(self, roles: Collection[str], at: float) -> None:
        pass

    def handled(self, what: str, start: float) -> None:
        pass


def busy_seconds(spans: Sequence[Span], until: float | None = None) -> dict[str, float]:
    """``{role: seconds}`` covered by the union of the role's spans (an unfinished one counts
    up to ``until``, or not at all without it)."""
    by_role: dict[str, list[tuple[float, float]]] = {}
    for span in spans:
        end = span.end if span.end is not None else until
        if end is not None:
            by_role.setdefault(span.role, []).append((span.start, end))
    busy = {}
    for role, intervals in by_role.items():
        total, reach = 0.0, float("-inf")
        for start, end in sorted(intervals):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        busy[role] = total
    return busy


def handler_name(handler: Callable[..., object]) -> str:
    """``on_fragment`` -> ``"fragment"``; a lambda or a partial -> ``"call"``."""
    name = getattr(handler, "__name__", "call")
    return "call" if name == "<lambda>" else name.removeprefix("on_")
