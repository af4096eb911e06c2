"""The Ape-X roles (Horgan et al. 2018), as plain classes first and Ray actors second; the
replay shards are in :mod:`rlkit.distributed.apex.shards`.

* :class:`ApexWorker`: steps ``N`` envs, each at its own rung of the exploration ladder, builds
  n-step transitions, computes their initial priorities with its own copy of the learner's
  weights (online and target), and adds them to its shard itself: the data never passes through
  the driver or the learner on its way in.
* :class:`ApexLearner`: samples batches from the shards in proportion to their total priority,
  takes importance-weighted steps, sends the new priorities back, and publishes weights.

Both reach the shards through a :class:`~rlkit.distributed.apex.shards.ShardClient`, the same
code in one process and under Ray.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import torch

from rlkit.algos.apex import ApexAlgorithm
from rlkit.algos.exploration import worker_rungs
from rlkit.core.common import role_seed, worker_seed
from rlkit.core.types import FragmentStats, NStepBatch, Weights
from rlkit.distributed.apex.shards import ShardClient
from rlkit.distributed.runtime.learner_group import GroupMember
from rlkit.distributed.runtime.parameter_server import WeightsChannel
from rlkit.envs.make import make_env
from rlkit.envs.runner import EnvRunner
from rlkit.replay.nstep import NStepBuilder
from rlkit.replay.prioritized import beta_at, importance_weights, split_by_priority
from rlkit.train.learner_state import SavesLearner

__all__ = ["ApexLearner", "ApexLearnerReport", "ApexWorker"]


class ApexLearnerReport(NamedTuple):
    """What :meth:`ApexLearner.train` returns.

    Attributes:
        updates: Learner updates so far.
        loss: Mean loss of this call's updates.
        mean_td_error: Mean ``|TD error|`` of this call's batches.
        beta: The importance-sampling exponent used.
        weights: The online network's weights after these updates (what the driver evaluates).
    """

    updates: int
    loss: float
    mean_td_error: float
    beta: float
    weights: Weights


class ApexWorker:
    """Steps ``envs_per_worker`` envs at their ladder rungs; sends n-step transitions with
    actor-side priorities to shard ``worker_index % num_shards``.

    Args:
        algo: The Ape-X algorithm (``rlkit.algos.apex``): networks, ladder, priorities.
        worker_index: ``i``; seeded with :func:`rlkit.core.common.worker_seed`.
        weights: Channel to the parameter server (publishes the learner's priority weights).
        shards: Where the transitions go.
        restart: Which incarnation this is: its restarts, plus 1000 per resume of the run
            (a fresh random stream each time; :func:`~rlkit.core.common.worker_seed`).
    """

    def __init__(self, algo: ApexAlgorithm, worker_index: int, weights: WeightsChannel,
                 shards: ShardClient, restart: int = 0) -> None:
        torch.set_num_threads(1)
        apex, shape = algo.apex, algo.config
        self.index, self.weights, self.shards = worker_index, weights, shards
        self.shard = worker_index % apex.num_shards
        seed = worker_seed(algo.config.seed, worker_index, restart)
        torch.manual_seed(seed)
        self.runner = EnvRunner(algo.config.env_id, seed, algo.action_kind, algo.name,
                                shape.envs_per_worker, algo.images)
        env = self.runner.env
        rungs = algo.ladder(shape.num_actors)
        self.rungs = rungs[worker_rungs(worker_index, shape.num_workers)]
        self.priorities = algo.make_priority_model(env)
        self.policy = algo.exploration_policy(algo.acting_network(self.priorities), env,
                                              np.random.default_rng(seed), self.rungs)
        self.nstep = NStepBuilder(apex.n_step, shape.gamma, shape.envs_per_worker)
        self.version = 0

    def ping(self) -> int:
        return self.index

    def sync_weights(self) -> None:
        """Load a newer version of the learner's weights (online and target), if any."""
        newer = self.weights.poll(self.version)
        if newer is not None:
            self.version = newer[0]
            self.priorities.load(newer[1])

    def collect(self, num_steps: int) -> FragmentStats:
        """Take at least ``num_steps`` env steps in all (fewer than ``envs_per_worker`` more
        when an env spent a step on its next-step reset), add the finished n-step windows to
        the shard with their priorities, and report.

        Returns:
            The fragment's :class:`~rlkit.core.types.FragmentStats`; the transitions themselves go
            to the shard, not back.
        """
        start = time.perf_counter()
        self.sync_weights()
        fragment = self.runner.run(-(-num_steps // self.runner.num_envs), self.policy)
        batch = self.nstep.add(fragment.batch, fragment.batch_ends, fragment.batch_env_ids)
        td_errors = self.priorities.td_errors(batch) if len(batch) else np.zeros(0)
        if len(batch):
            self.shards.add(self.shard, batch, td_errors)
        return FragmentStats(self.index, fragment.num_steps, fragment.episode_returns,
                             self.version, time.perf_counter() - start)


class ApexLearner(SavesLearner, GroupMember):
    """Samples from the shards, takes importance-weighted steps, returns new priorities.
    In a learner group of ``world_size`` ranks, each rank samples ``batch_size / world_size``
    per update with its own random stream and sends back the priorities of what it sampled;
    the gradients are averaged over the ranks and rank 0 publishes.

    Args:
        algo: The Ape-X algorithm (the learner builds a probe env from its config to read the
            spaces; envs are never pickled from the driver).
        weights: Channel to the parameter server (``None``: a rank that does not publish).
        shards: The replay shards.
        device: Torch device of the networks.
        rank, world_size: This learner's rank and the group's size (1: no group).
        restart: Its incarnation (restarts, plus 1000 per resume): its draws across the
            shards use ``role_seed(seed, "learner sampler", rank, restart)``.
    """

    def __init__(self, algo: ApexAlgorithm, weights: WeightsChannel | None, shards: ShardClient,
                 device: str = "cpu", rank: int = 0, world_size: int = 1,
                 restart: int = 0) -> None:
        torch.set_num_threads(algo.config.torch_threads)
        torch.manual_seed(algo.config.seed)
        self.algo, self.weights, self.shards = algo, weights, shards
        env = make_env(algo.config.env_id, algo.config.seed, algo.action_kind, algo.name,
                       algo.images)
        self.learner = algo.make_learner(env, torch.device(device))
        env.close()
        self.rank, self.batch_size = rank, algo.config.batch_size // world_size
        self.rng = np.random.default_rng(role_seed(algo.config.seed, "learner sampler", rank,
                                                   restart))
        self.totals: np.ndarray | None = None
        self.mins: np.ndarray | None = None

    def ping(self) -> bool:
        return True

    def after_restore(self) -> None:  # the actors act with the loaded weights
        self.publish()

    def publish(self) -> int:
        """Send the current priority weights (online and target) to the parameter server."""
        if self.weights is not None:
            self.weights.publish(self.learner.get_priority_weights())
            self.weights.flush()
        return self.learner.updates

    def train(self, num_updates: int, progress: float) -> ApexLearnerReport:
        """``num_updates`` importance-weighted updates, sampled in proportion to the shards'
        total priorities (as last reported), with ``beta = beta_at(progress)``.

        The batches of one call are drawn together, so the later ones do not yet see the
        priorities the earlier ones produced: a staleness of at most ``num_updates`` batches
        that Ape-X's own prefetching learner accepts too.

        Returns:
            An :class:`ApexLearnerReport`.
        """
        apex = self.algo.apex
        beta = beta_at(progress, apex.beta_start)
        if self.totals is None:
            stats = self.shards.stats()
            self.totals = np.array([s.total_priority for s in stats])
            self.mins = np.array([s.min_priority for s in stats])
        counts = np.stack([split_by_priority(self.totals, self.batch_size, self.rng)
                           for _ in range(num_updates)], axis=1)  # (K, num_updates)
        answers = self.shards.sample_many(counts, beta)
        self.totals = np.array([a.stats.total_priority for a in answers])
        self.mins = np.array([a.stats.min_priority for a in answers])
        losses, td_means, new_td = [], [], [[] for _ in answers]
        for m in range(num_updates):
            parts = [(k, a.samples[m]) for k, a in enumerate(answers)
                     if a.samples[m] is not None]
            batch = NStepBatch(*(np.concatenate(f) for f in zip(*(p.batch for _, p in parts))))
            prios = np.concatenate([p.priorities for _, p in parts])
            weights = importance_weights(prios, float(self.mins.min()), beta)
            report, td = self.learner.update_prioritized(batch, weights)
            losses.append(float(report.loss))
            td_means.append(float(np.mean(td)))
            start = 0
            for k, p in parts:
                new_td[k].append((p.ids, td[start:start + len(p.ids)]))
                start += len(p.ids)
            if self.weights is not None and self.learner.updates % apex.publish_every == 0:
                self.weights.publish(self.learner.get_priority_weights())
        for k, pairs in enumerate(new_td):
            if pairs:
                self.shards.update_priorities(k, np.concatenate([i for i, _ in pairs]),
                                              np.concatenate([t for _, t in pairs]))
        return ApexLearnerReport(self.learner.updates, float(np.mean(losses)),
                                 float(np.mean(td_means)), beta, self.learner.get_weights())
