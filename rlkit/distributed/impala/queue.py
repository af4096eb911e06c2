"""IMPALA's fragment queue (a plain class; ``ray.remote(FragmentQueue)`` makes the actor):
the only meeting point of actors and learner. Trajectories flow in (bounded: a full queue makes
``put`` wait, which is the back-pressure), batches flow out, and the latest weights sit beside
them, so the reply to every ``put`` tells the actor whether newer weights exist without another
round trip."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, NamedTuple

from rlkit.core.types import Weights
from rlkit.envs.runner import Fragment


class QueueStats(NamedTuple):
    """The queue's counters (:meth:`FragmentQueue.stats`)."""

    size: int  # fragments held now
    high_water: int  # most ever held
    puts: int  # fragments accepted
    wait_seconds: float  # summed over finished puts: time spent waiting for room
    waiting_puts: int  # puts blocked right now


def call(target: Any, method: str, *args: Any, timeout: float) -> Any:
    """``target.method(*args)``: through Ray (with ``timeout``) if ``target`` is an actor
    handle, else directly (a plain object in this process, as the tests drive them)."""
    fn = getattr(target, method)
    if hasattr(fn, "remote"):
        import ray

        return ray.get(fn.remote(*args), timeout=timeout)
    return fn(*args)


class FragmentQueue:
    """A bounded FIFO of fragments plus the latest published weights (thread-safe).

    Args:
        maxsize: Fragments held at most; a ``put`` on a full queue waits for room.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self.items: collections.deque[Fragment] = collections.deque()
        self.cond = threading.Condition()
        self.closed = False
        self.version, self.weights = -1, None
        self.high_water, self.puts, self.wait_seconds = 0, 0, 0.0  # finished puts' waits
        self.waiting_puts = 0  # puts blocked right now
        self.round_share = (1, 1)  # synchronous rounds: the share of workers still sending
        self.restarting, self.restarts = False, 0  # the learner group's restarts (see below)

    def ping(self) -> bool:
        return True

    def put(self, fragment: Fragment, timeout: float) -> int:
        """Append ``fragment``, waiting while the queue is full. Returns the latest weights
        version, or -1 once the queue is closed (the actor should stop).

        Raises:
            TimeoutError: if the queue stayed full for ``timeout`` seconds.
        """
        start = time.monotonic()
        with self.cond:
            self.waiting_puts += 1
            room = self.cond.wait_for(lambda: self.closed or len(self.items) < self.maxsize,
                                      timeout)
            self.waiting_puts -= 1
            self.wait_seconds += time.monotonic() - start
            if self.closed:
                return -1
            if not room:
                raise TimeoutError(f"the fragment queue stayed full ({self.maxsize} fragments)"
                                   f" for {timeout} s: the learner stopped taking batches. Fix: "
                                   f"check the learner's log, or raise timeout_s.")
            self.items.append(fragment)
            self.puts += 1
            self.high_water = max(self.high_water, len(self.items))
            self.cond.notify_all()
            return self.version

    def shrink_rounds(self, workers_left: int, workers: int, lost: int) -> None:
        """A synchronous run lost worker ``lost`` for good: from now on a batch is the share of
        ``get_batch``'s ``n`` that ``workers_left`` of ``workers`` send in a round (each sends
        ``batch_fragments / workers`` per version), so the learner does not wait for
        fragments that will never come. The lost worker's fragments still held are dropped:
        taken alone they would make a round of their own, and every round after it would
        train on fragments one version old."""
        with self.cond:
            self.round_share = (workers_left, workers)
            self.items = collections.deque(f for f in self.items if f.worker != lost)
            self.cond.notify_all()

    def get_batch(self, n: int, timeout: float) -> list[Fragment]:
        """The ``n`` oldest fragments (fewer after :meth:`shrink_rounds`, even one that
        comes while this waits), waiting until there are that many ([] once closed, or once
        the learner group restarts: a killed rank's call still waiting here would otherwise take
        the first fragments its replacement needs).

        Raises:
            TimeoutError: if fewer than ``n`` arrived within ``timeout`` seconds.
        """
        def wanted() -> int:
            left, workers = self.round_share
            return n if left == workers else max(1, n * left // workers)

        with self.cond:
            restarts = self.restarts
            ready = self.cond.wait_for(lambda: self.closed or self.restarts != restarts
                                       or len(self.items) >= wanted(), timeout)
            if self.closed or self.restarts != restarts:
                return []
            if not ready:
                raise TimeoutError(f"the fragment queue got {len(self.items)} of the "
                                   f"{wanted()} fragments the learner needs within {timeout} s: "
                                   f"the actors stopped sending. Fix: check the actors' logs, "
                                   f"or raise timeout_s.")
            batch = [self.items.popleft() for _ in range(wanted())]
            self.cond.notify_all()
            return batch

    def publish(self, version: int, weights: Weights) -> None:
        """Keep ``weights`` as the latest if ``version`` is newer than what is held."""
        with self.cond:
            if version > self.version:
                self.version, self.weights = version, weights
                self.cond.notify_all()

    def latest_version(self) -> int:
        with self.cond:
            return self.version

    def learner_restart(self, under_way: bool) -> None:
        """The driver tells the queue that it restarts the learner group (``True``) or has
        restarted it. The old ranks' waits for a batch end (:meth:`get_batch`); until the group
        is back no version comes, and a worker's wait for one must not run out (the restart has
        time limits of its own)."""
        with self.cond:
            self.restarting = under_way
            self.restarts += under_way
            self.cond.notify_all()

    def wait_for_version(self, newer_than: int, timeout: float
                         ) -> tuple[int, Weights | None] | None:
        """The latest ``(version, weights)`` once ``version > newer_than`` (or the queue closed);
        ``None`` if ``timeout`` ran out while the learner group was restarting (ask again).

        Raises:
            TimeoutError: if no newer version came within ``timeout`` seconds, and no restart
                of the learner group was under way.
        """
        with self.cond:
            restarts = self.restarts
            if not self.cond.wait_for(lambda: self.closed or self.version > newer_than, timeout):
                if self.restarting or self.restarts != restarts:
                    return None
                raise TimeoutError(f"no weights newer than version {newer_than} within "
                                   f"{timeout} s. Fix: check the learner's log.")
            return self.version, self.weights

    def close(self) -> None:
        """Release every waiting ``put``/``get_batch``; actors stop at their next ``put``."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def stats(self) -> QueueStats:
        with self.cond:
            return QueueStats(len(self.items), self.high_water, self.puts, self.wait_seconds,
                              self.waiting_puts)
