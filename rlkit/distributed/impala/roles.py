"""IMPALA's roles as plain classes (unit-tested without Ray; ``ray.remote(Cls)`` makes actors).

* :class:`TrajectoryQueue`: the only meeting point of actors and learner. Trajectories flow in
  (bounded: a full queue makes ``put`` wait, which is the back-pressure), batches of ``B`` flow
  out, and the latest weights sit beside them, so the reply to every ``put`` tells the actor
  whether newer weights exist without another round trip.
* :class:`ImpalaActor`: steps its own envs with the weights it has, ships ``T``-step
  trajectories with their behaviour log-probabilities and policy version, and picks up new
  weights between fragments. It never waits for the learner, only for room in the queue.
* :class:`ImpalaLearner`: takes ``B`` trajectories per update, measures each one's policy lag,
  updates with V-trace, and publishes every new version.

Why not ``ray.util.queue.Queue(maxsize=...)``? It bounds memory the same way, but its blocking
``get`` returns one item per remote call (``get_nowait_batch`` does not wait), it cannot carry
the weights, and it cannot be driven in-process by a test. This queue is a threaded actor
(``max_concurrency``), so a ``put`` blocked on a full queue does not block ``get_batch``.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, NamedTuple

import numpy as np
import torch

from rlkit.algos.a2c import ActorCritic, sampling_policy
from rlkit.algos.impala import IMPALAConfig, VTraceLearner
from rlkit.core.common import worker_seed
from rlkit.core.networks import load_numpy_weights
from rlkit.core.types import Weights
from rlkit.envs.runner import EnvRunner, Fragment
from rlkit.train.checkpoint import SavesLearner


class QueueStats(NamedTuple):
    """The queue's counters (:meth:`TrajectoryQueue.stats`)."""

    size: int  # fragments held now
    high_water: int  # most ever held
    puts: int  # fragments accepted
    wait_seconds: float  # summed over finished puts: time spent waiting for room
    waiting_puts: int  # puts blocked right now


class ImpalaLearnerReport(NamedTuple):
    """What :meth:`ImpalaLearner.train` returns.

    Attributes:
        env_steps: Real env steps in the fragments consumed.
        episode_returns: Returns of the episodes that finished in them.
        lags: Per fragment, the learner's version minus the version that acted.
        loss: The last update's loss.
        updates: Updates so far (the policy version).
        busy_seconds: Time spent updating and publishing.
        wait_seconds: Time spent waiting for batches.
        weights: The weights after the last update, so the driver evaluates exactly the policy
            these env steps trained (a newer version may already be published).
    """

    env_steps: int
    episode_returns: list[float]
    lags: list[int]
    loss: float
    updates: int
    busy_seconds: float
    wait_seconds: float
    weights: Weights


def call(target: Any, method: str, *args: Any, timeout: float) -> Any:
    """``target.method(*args)``: through Ray (with ``timeout``) if ``target`` is an actor
    handle, else directly (a plain object in this process, as the tests drive them)."""
    fn = getattr(target, method)
    if hasattr(fn, "remote"):
        import ray

        return ray.get(fn.remote(*args), timeout=timeout)
    return fn(*args)


class TrajectoryQueue:
    """A bounded FIFO of trajectories plus the latest published weights (thread-safe).

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

    def ping(self) -> bool:
        return True

    def put(self, trajectory: Fragment, timeout: float) -> int:
        """Append ``trajectory``, waiting while the queue is full. Returns the latest weights
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
                raise TimeoutError(f"the trajectory queue stayed full ({self.maxsize} fragments)"
                                   f" for {timeout} s: the learner stopped taking batches. Fix: "
                                   f"check the learner's log, or raise timeout_s.")
            self.items.append(trajectory)
            self.puts += 1
            self.high_water = max(self.high_water, len(self.items))
            self.cond.notify_all()
            return self.version

    def get_batch(self, n: int, timeout: float) -> list[Fragment]:
        """The ``n`` oldest trajectories, waiting until there are ``n`` ([] once closed).

        Raises:
            TimeoutError: if fewer than ``n`` arrived within ``timeout`` seconds.
        """
        with self.cond:
            ready = self.cond.wait_for(lambda: self.closed or len(self.items) >= n, timeout)
            if self.closed:
                return []
            if not ready:
                raise TimeoutError(f"the trajectory queue got {len(self.items)} of the {n} "
                                   f"fragments the learner needs within {timeout} s: the actors "
                                   f"stopped sending. Fix: check the actors' logs, or raise "
                                   f"timeout_s.")
            batch = [self.items.popleft() for _ in range(n)]
            self.cond.notify_all()
            return batch

    def publish(self, version: int, weights: Weights) -> None:
        """Keep ``weights`` as the latest if ``version`` is newer than what is held."""
        with self.cond:
            if version > self.version:
                self.version, self.weights = version, weights
                self.cond.notify_all()

    def wait_for_version(self, newer_than: int, timeout: float) -> tuple[int, Weights | None]:
        """The latest ``(version, weights)`` once ``version > newer_than`` (or the queue closed).

        Raises:
            TimeoutError: if no newer version came within ``timeout`` seconds.
        """
        with self.cond:
            if not self.cond.wait_for(lambda: self.closed or self.version > newer_than, timeout):
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


class ImpalaActor:
    """Steps ``config.envs_per_worker`` envs with its copy of the policy; ships trajectories.

    Args:
        config: The run's settings.
        index: Actor index (seeded with :func:`rlkit.core.common.worker_seed`).
        queue: A :class:`TrajectoryQueue` or its actor handle.
        restart: How often this actor was restarted (a fresh random stream each time).
        timeout_s: Longest wait on the queue (for room, or for new weights).
    """

    def __init__(self, config: IMPALAConfig, index: int, queue: Any, restart: int = 0,
                 timeout_s: float = 60.0) -> None:
        torch.set_num_threads(1)
        seed = worker_seed(config.seed, index, restart)
        self.config, self.index, self.queue = config, index, queue
        self.timeout_s = timeout_s
        self.runner = EnvRunner(config.env_id, seed, "discrete", "IMPALA", config.envs_per_worker)
        self.net = ActorCritic(self.runner.obs_dim, self.runner.action_dim, config.hidden)
        self.policy = sampling_policy(self.net, np.random.default_rng(seed))
        self.version = -1
        self.fragments = 0

    def ping(self) -> bool:
        return True

    def load_newer(self, newer_than: int) -> None:
        """Wait for weights newer than ``newer_than`` and act with them from now on."""
        version, weights = call(self.queue, "wait_for_version", newer_than,
                                self.timeout_s, timeout=2 * self.timeout_s)
        if version > self.version and weights is not None:
            load_numpy_weights(self.net, weights)
            self.version = version

    def collect(self) -> Fragment:
        """``T`` vector steps of every env (the fixed on-policy shape, reset rows masked),
        tagged with the acting policy's version."""
        fragment = self.runner.run(self.config.unroll_length, self.policy, fixed_length=True)
        fragment.policy_version, fragment.worker = self.version, self.index
        self.fragments += 1
        return fragment

    def run(self, max_fragments: int | None = None) -> int:
        """Collect and ship fragments until the queue closes (or ``max_fragments``); returns
        the number shipped. Asynchronous: take new weights between fragments when the queue
        says there are some. Synchronous: after ``B / num_workers`` fragments, wait for the
        next version, so no fragment is ever acted with stale weights."""
        per_version = self.config.batch_fragments // self.config.num_workers
        if self.version < 0:
            self.load_newer(-1)  # the learner's initial weights, before the first step
        shipped = 0
        while max_fragments is None or shipped < max_fragments:
            latest = call(self.queue, "put", self.collect(), self.timeout_s,
                          timeout=2 * self.timeout_s)
            if latest < 0:
                break
            shipped += 1
            if self.config.synchronous and shipped % per_version == 0:
                self.load_newer(self.version)
            elif not self.config.synchronous and latest > self.version:
                self.load_newer(self.version)
        return shipped


class ImpalaLearner(SavesLearner):
    """Takes batches from the queue, updates with V-trace, publishes each version.

    Args:
        config: The run's settings.
        obs_dim, n_actions: Sizes of the network.
        queue: A :class:`TrajectoryQueue` or its actor handle.
        timeout_s: Longest wait for a batch.
    """

    def __init__(self, config: IMPALAConfig, obs_dim: int, n_actions: int, queue: Any,
                 timeout_s: float = 60.0) -> None:
        torch.set_num_threads(1)
        self.config, self.queue, self.timeout_s = config, queue, timeout_s
        self.learner = VTraceLearner(obs_dim, n_actions, config)
        self.publish()

    def ping(self) -> bool:
        return True

    def after_restore(self) -> None:  # the actors act with the loaded weights
        self.publish()

    def publish(self) -> None:
        call(self.queue, "publish", self.learner.updates, self.learner.get_weights(),
             timeout=self.timeout_s)

    def train(self, num_updates: int) -> ImpalaLearnerReport:
        """Up to ``num_updates`` updates of ``B`` fragments each (fewer once the queue closes).

        Returns:
            An :class:`ImpalaLearnerReport`.
        """
        env_steps, returns, lags, loss, busy, wait = 0, [], [], 0.0, 0.0, 0.0
        for _ in range(num_updates):
            asked = time.perf_counter()
            batch = call(self.queue, "get_batch", self.config.batch_fragments,
                         self.timeout_s, timeout=2 * self.timeout_s)
            if not batch:
                break
            start = time.perf_counter()
            wait += start - asked
            lags += [self.learner.updates - f.policy_version for f in batch]
            env_steps += sum(f.num_steps for f in batch)
            returns += [r for f in batch for r in f.episode_returns]
            loss = self.learner.update(batch)["loss"]
            self.publish()
            busy += time.perf_counter() - start
        return ImpalaLearnerReport(env_steps, returns, lags, loss, self.learner.updates, busy,
                                   wait, self.learner.get_weights())
