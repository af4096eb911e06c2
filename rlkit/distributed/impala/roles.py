"""IMPALA's roles as plain classes (unit-tested without Ray; ``ray.remote(Cls)`` makes actors).

* :class:`~rlkit.distributed.impala.queue.FragmentQueue` (in ``queue.py``; imported here
  too): the only meeting point of actors and learner. Trajectories flow in
  (bounded: a full queue makes ``put`` wait, which is the back-pressure), batches of ``B`` flow
  out, and the latest weights sit beside them, so the reply to every ``put`` tells the actor
  whether newer weights exist without another round trip.
* :class:`IMPALAWorker`: steps its own envs with the weights it has, ships ``T``-step
  fragments with their behaviour log-probabilities and policy version, and picks up new
  weights between fragments. It never waits for the learner, only for room in the queue.
* :class:`IMPALALearner`: takes ``B`` fragments per update, measures each one's policy lag,
  updates with V-trace, and publishes every new version.

Why not ``ray.util.queue.Queue(maxsize=...)``? It bounds memory the same way, but its blocking
``get`` returns one item per remote call (``get_nowait_batch`` does not wait), it cannot carry
the weights, and it cannot be driven in-process by a test. This queue is a threaded actor
(``max_concurrency``), so a ``put`` blocked on a full queue does not block ``get_batch``.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import numpy as np
import torch

from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.policy_heads import acting_policy, make_actor_critic
from rlkit.core.common import worker_seed
from rlkit.core.networks import device_label, load_numpy_weights
from rlkit.core.spaces import ObsSpec
from rlkit.core.types import Weights
from rlkit.envs.runner import EnvRunner, Fragment
from rlkit.distributed.impala.queue import QueueStats, FragmentQueue, call  # noqa: F401
from rlkit.distributed.runtime.learner_group import GroupMember
from rlkit.train.learner_state import SavesLearner


class IMPALALearnerReport(NamedTuple):
    """What :meth:`IMPALALearner.train` returns.

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
        diagnostics: Per update, each metric the learner returned besides the loss (PPO's
            ``approx_kl`` and ``clip_fraction`` among them).
    """

    env_steps: int
    episode_returns: list[float]
    lags: list[int]
    loss: float
    updates: int
    busy_seconds: float
    wait_seconds: float
    weights: Weights
    diagnostics: dict[str, list[float]]

    @staticmethod
    def merged(reports: list[IMPALALearnerReport]) -> IMPALALearnerReport:
        """A learner group's report of one call from its ranks' (in rank order): steps,
        returns and lags of them all, the metrics averaged, rank 0's count and weights, the
        slowest rank's seconds."""
        return IMPALALearnerReport(
            sum(r.env_steps for r in reports), [x for r in reports for x in r.episode_returns],
            [x for r in reports for x in r.lags], float(np.mean([r.loss for r in reports])),
            reports[0].updates, max(r.busy_seconds for r in reports),
            max(r.wait_seconds for r in reports), reports[0].weights,
            {k: np.mean([r.diagnostics[k] for r in reports], axis=0).tolist()
             for k in reports[0].diagnostics})


class IMPALAWorker:
    """Steps ``config.envs_per_worker`` envs with its copy of the policy; ships fragments.

    Args:
        config: The run's settings.
        index: Actor index (seeded with :func:`rlkit.core.common.worker_seed`).
        queue: A :class:`FragmentQueue` or its actor handle.
        restart: Which incarnation this is: its restarts, plus 1000 per resume of the run
            (a fresh random stream each time; :func:`~rlkit.core.common.worker_seed`).
        timeout_s: Longest wait on the queue (for room, or for new weights).
    """

    def __init__(self, config: IMPALAConfig, index: int, queue: Any, restart: int = 0,
                 timeout_s: float = 60.0) -> None:
        torch.set_num_threads(1)
        seed = worker_seed(config.seed, index, restart)
        self.config, self.index, self.queue = config, index, queue
        self.timeout_s = timeout_s
        kind = config.action_kind
        self.runner = EnvRunner(config.env_id, seed, kind, config.algorithm,
                                config.envs_per_worker, config.images)
        self.net = make_actor_critic(self.runner.obs_spec, self.runner.action_dim, config.hidden,
                                     kind, config.shared_encoder)
        self.policy = acting_policy(self.net, np.random.default_rng(seed))
        self.version = -1
        self.fragments = 0

    def ping(self) -> bool:
        return True

    def load_newer(self, newer_than: int) -> None:
        """Wait for weights newer than ``newer_than`` and act with them from now on (through a
        restart of the learner group: the queue answers ``None`` until the group is back)."""
        while (latest := call(self.queue, "wait_for_version", newer_than, self.timeout_s,
                              timeout=2 * self.timeout_s)) is None:
            pass
        version, weights = latest
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


class IMPALALearner(SavesLearner, GroupMember):
    """Takes batches from the queue, updates with V-trace (or with PPO's epochs, given a
    :class:`~rlkit.algos.ppo.PPOConfig`), publishes each version. In a
    learner group of ``world_size`` ranks, each rank takes ``B / world_size`` fragments per
    update and rank 0 publishes.

    Args:
        config: The run's settings.
        obs_dim, n_actions: Sizes of the network.
        queue: A :class:`FragmentQueue` or its actor handle.
        timeout_s: Longest wait for a batch.
        rank, world_size: This learner's rank and the group's size (1: no group).
        device: ``"cpu"`` or ``"cuda"`` (told, not guessed: Ray hides a GPU only from an actor
            that asks for one).
    """

    def __init__(self, config: IMPALAConfig, obs_dim: int | ObsSpec, n_actions: int, queue: Any,
                 timeout_s: float = 60.0, rank: int = 0, world_size: int = 1,
                 device: str = "cpu") -> None:
        torch.set_num_threads(1)
        self.config, self.queue, self.timeout_s = config, queue, timeout_s
        self.rank, self.world_size = rank, world_size
        self.learner = config.make_learner(obs_dim, n_actions, device)  # V-trace's, or PPO's
        self.version_offset = 0  # > 0 after a restart from a checkpoint (see after_restore)
        self.consumed = 0  # real env steps in the batches this rank trained on
        self.publish()

    def ping(self) -> bool:
        return True

    def device_name(self) -> str:
        """The learner's device, e.g. ``"cpu"`` or ``"cuda: NVIDIA H100 80GB HBM3"``."""
        return device_label(self.learner.device)

    def consumed_env_steps(self) -> int:
        """Real env steps in the batches this rank has trained on since it started. An actor
        runs its calls in order, so read right before ``state()``, this counts exactly the
        steps behind the updates the state holds."""
        return self.consumed

    def version(self) -> int:
        """The policy version: updates, counted on from the last version published before a
        restart, so versions never go back and the actors take the restored weights."""
        return self.learner.updates + self.version_offset

    def after_restore(self) -> None:
        """Rank 0 publishes the loaded weights as a version newer than any before (the actors
        take them); the other ranks, restored after it, count on from that version."""
        latest = call(self.queue, "latest_version", timeout=self.timeout_s)
        self.version_offset = max(0, latest + (self.rank == 0) - self.learner.updates)
        self.publish()

    def publish(self) -> None:
        if self.rank == 0:
            call(self.queue, "publish", self.version(), self.learner.get_weights(),
                 timeout=self.timeout_s)

    def train(self, num_updates: int) -> IMPALALearnerReport:
        """Up to ``num_updates`` updates of ``B`` fragments each (fewer once the queue closes).

        Returns:
            An :class:`IMPALALearnerReport`.
        """
        env_steps, returns, lags, loss, busy, wait = 0, [], [], 0.0, 0.0, 0.0
        diagnostics: dict[str, list[float]] = {}
        for _ in range(num_updates):
            asked = time.perf_counter()
            batch = call(self.queue, "get_batch", self.config.batch_fragments // self.world_size,
                         self.timeout_s, timeout=2 * self.timeout_s)
            if not batch:
                break
            start = time.perf_counter()
            wait += start - asked
            lags += [self.version() - f.policy_version for f in batch]
            steps = sum(f.num_steps for f in batch)
            env_steps += steps
            returns += [r for f in batch for r in f.episode_returns]
            report = self.learner.update(batch)
            loss = report.loss
            for key, value in report._asdict().items():
                if key != "loss":
                    diagnostics.setdefault(key, []).append(float(value))
            self.consumed += steps
            self.publish()
            busy += time.perf_counter() - start
        return IMPALALearnerReport(env_steps, returns, lags, loss, self.learner.updates, busy,
                                   wait, self.learner.get_weights() if self.rank == 0 else {},
                                   diagnostics)
