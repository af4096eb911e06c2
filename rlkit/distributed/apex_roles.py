"""The Ape-X roles (Horgan et al. 2018), as plain classes first and Ray actors second.

* :class:`ReplayShard`: one prioritized replay
  (:class:`rlkit.prioritized_replay.PrioritizedReplay`).
  ``K`` shards hold the data between them.
* :class:`ApexWorker`: steps ``N`` envs, each at its own rung of the exploration ladder, builds
  n-step transitions, computes their initial priorities with its own copy of the learner's
  weights (online and target), and adds them to its shard itself: the data never passes through
  the driver or the learner on its way in.
* :class:`ApexLearner`: samples batches from the shards in proportion to their total priority,
  takes importance-weighted steps, sends the new priorities back, and publishes weights.

Shards are reached through a :class:`ShardClient`: :class:`LocalShards` calls plain objects (one
process, tests), :class:`RayShards` calls actors. The roles' code is the same either way.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np
import torch

from rlkit.algos.apex import ApexAlgorithm
from rlkit.distributed.parameter_server import WeightsChannel
from rlkit.envs import make_env
from rlkit.exploration import worker_rungs
from rlkit.nstep import NStepBuilder
from rlkit.prioritized_replay import (PrioritizedReplay, PrioritizedSample, beta_at,
                                      importance_weights, split_by_priority)
from rlkit.rollout import EnvRunner
from rlkit.types import NStepBatch

__all__ = ["ApexLearner", "ApexWorker", "LocalShards", "RayShards", "ReplayShard", "ShardClient"]


class ReplayShard:
    """One shard of the replay: a :class:`PrioritizedReplay` behind actor methods.

    Args:
        capacity, obs_dim, action_dim, alpha, seed: As for :class:`PrioritizedReplay`.
    """

    def __init__(self, capacity: int, obs_dim: int, action_dim: int | None, alpha: float,
                 seed: int) -> None:
        self.replay = PrioritizedReplay(capacity, obs_dim, action_dim, alpha, seed=seed)

    def ping(self) -> bool:
        return True

    def add(self, batch: NStepBatch, td_errors: np.ndarray) -> int:
        """Store transitions with their initial ``|TD error|``; returns the shard's size."""
        self.replay.add(batch, td_errors)
        return len(self.replay)

    def stats(self) -> tuple[float, float, int]:
        """``(total priority, min priority, size)``."""
        return self.replay.total_priority, self.replay.min_priority, len(self.replay)

    def sample_many(self, counts: list[int], beta: float
                    ) -> tuple[list[PrioritizedSample | None], float, float]:
        """One sample of ``counts[m]`` items for each batch ``m`` (``None`` where 0), plus the
        shard's total and min priority *after* drawing them, for the learner's next split."""
        samples = [self.replay.sample(c, beta) if c > 0 else None for c in counts]
        return samples, self.replay.total_priority, self.replay.min_priority

    def update_priorities(self, ids: np.ndarray, td_errors: np.ndarray) -> int:
        return self.replay.update_priorities(ids, td_errors)

    def histogram(self, bins: np.ndarray) -> np.ndarray:
        """Counts of stored priorities ``p = (|delta| + eps) ** alpha`` in ``bins``."""
        n = len(self.replay)
        return np.histogram(self.replay.tree[np.arange(n)], bins=bins)[0]


class ShardClient(Protocol):
    """How the worker and the learner talk to the shards (in one process or under Ray)."""

    def add(self, shard: int, batch: NStepBatch, td_errors: np.ndarray) -> None: ...

    def sample_many(self, counts: np.ndarray, beta: float
                    ) -> list[tuple[list[PrioritizedSample | None], float, float]]: ...

    def update_priorities(self, shard: int, ids: np.ndarray, td_errors: np.ndarray) -> None: ...

    def stats(self) -> list[tuple[float, float, int]]: ...


class LocalShards:
    """Shards as plain objects in this process."""

    def __init__(self, shards: list[ReplayShard]) -> None:
        self.shards = shards

    def add(self, shard: int, batch: NStepBatch, td_errors: np.ndarray) -> None:
        self.shards[shard].add(batch, td_errors)

    def sample_many(self, counts: np.ndarray, beta: float
                    ) -> list[tuple[list[PrioritizedSample | None], float, float]]:
        return [s.sample_many(c.tolist(), beta) for s, c in zip(self.shards, counts)]

    def update_priorities(self, shard: int, ids: np.ndarray, td_errors: np.ndarray) -> None:
        self.shards[shard].update_priorities(ids, td_errors)

    def stats(self) -> list[tuple[float, float, int]]:
        return [s.stats() for s in self.shards]


class RayShards:
    """Shards as Ray actors. ``add`` keeps one call in flight per caller (it waits for the
    previous add before sending the next: back-pressure, so a fast worker cannot queue
    unbounded data at a busy shard); ``update_priorities`` does not wait at all."""

    def __init__(self, handles: list[Any], timeout_s: float = 120.0) -> None:
        self.handles, self.timeout_s = handles, timeout_s
        self.pending_add: Any = None

    def __getstate__(self) -> dict[str, Any]:  # a copy sent to another actor starts afresh
        return {"handles": self.handles, "timeout_s": self.timeout_s, "pending_add": None}

    def add(self, shard: int, batch: NStepBatch, td_errors: np.ndarray) -> None:
        import ray

        if self.pending_add is not None:
            ray.get(self.pending_add, timeout=self.timeout_s)
        self.pending_add = self.handles[shard].add.remote(batch, td_errors)

    def sample_many(self, counts: np.ndarray, beta: float
                    ) -> list[tuple[list[PrioritizedSample | None], float, float]]:
        import ray

        refs = [h.sample_many.remote(c.tolist(), beta) for h, c in zip(self.handles, counts)]
        return ray.get(refs, timeout=self.timeout_s)

    def update_priorities(self, shard: int, ids: np.ndarray, td_errors: np.ndarray) -> None:
        self.handles[shard].update_priorities.remote(ids, td_errors)

    def stats(self) -> list[tuple[float, float, int]]:
        import ray

        return ray.get([h.stats.remote() for h in self.handles], timeout=self.timeout_s)


class ApexWorker:
    """Steps ``envs_per_worker`` envs at their ladder rungs; sends n-step transitions with
    actor-side priorities to shard ``worker_index % num_shards``.

    Args:
        algo: The Ape-X algorithm (``rlkit.algos.apex``): networks, ladder, priorities.
        worker_index: ``i``; seeds ``seed + 1000 * (i + 1) + 100_000 * restart``.
        weights: Channel to the parameter server (publishes the learner's priority weights).
        shards: Where the transitions go.
        restart: Which incarnation of this worker this is (fresh random stream each time).
    """

    def __init__(self, algo: ApexAlgorithm, worker_index: int, weights: WeightsChannel,
                 shards: ShardClient, restart: int = 0) -> None:
        torch.set_num_threads(1)
        apex = algo.apex
        self.index, self.weights, self.shards = worker_index, weights, shards
        self.shard = worker_index % apex.num_shards
        seed = algo.config.seed + 1000 * (worker_index + 1) + 100_000 * restart
        torch.manual_seed(seed)
        self.runner = EnvRunner(algo.config.env_id, seed, algo.action_kind, algo.name,
                                apex.envs_per_worker)
        env = self.runner.env
        rungs = algo.ladder(apex.num_workers * apex.envs_per_worker)
        self.rungs = rungs[worker_rungs(worker_index, apex.num_workers)]
        self.priorities = algo.make_priority_model(env)
        self.policy = algo.exploration_policy(algo.acting_network(self.priorities), env,
                                              np.random.default_rng(seed), self.rungs)
        self.nstep = NStepBuilder(apex.n_step, algo.config.gamma, apex.envs_per_worker)
        self.version = 0

    def ping(self) -> int:
        return self.index

    def sync_weights(self) -> None:
        """Load a newer version of the learner's weights (online and target), if any."""
        newer = self.weights.poll(self.version)
        if newer is not None:
            self.version = newer[0]
            self.priorities.load(newer[1])

    def collect(self, num_steps: int) -> dict[str, Any]:
        """Take at least ``num_steps`` env steps in all (fewer than ``envs_per_worker`` more
        when an env spent a step on its next-step reset), add the finished n-step windows to
        the shard with their priorities, and report.

        Returns:
            ``{"worker", "env_steps", "episode_returns", "version", "seconds",
            "mean_priority"}``; the transitions themselves go to the shard, not back.
        """
        start = time.perf_counter()
        self.sync_weights()
        fragment = self.runner.run(-(-num_steps // self.runner.num_envs), self.policy)
        batch = self.nstep.add(fragment.batch, fragment.batch_ends, fragment.batch_env_ids)
        td_errors = self.priorities.td_errors(batch) if len(batch) else np.zeros(0)
        if len(batch):
            self.shards.add(self.shard, batch, td_errors)
        return {"worker": self.index, "env_steps": len(fragment.batch),
                "episode_returns": fragment.episode_returns, "version": self.version,
                "seconds": time.perf_counter() - start,
                "mean_priority": float(td_errors.mean()) if len(td_errors) else float("nan")}


class ApexLearner:
    """Samples from the shards, takes importance-weighted steps, returns new priorities.

    Args:
        algo: The Ape-X algorithm (the learner builds a probe env from its config to read the
            spaces; envs are never pickled from the driver).
        weights: Channel to the parameter server.
        shards: The replay shards.
        device: Torch device of the networks.
    """

    def __init__(self, algo: ApexAlgorithm, weights: WeightsChannel, shards: ShardClient,
                 device: str = "cpu") -> None:
        torch.set_num_threads(algo.config.torch_threads)
        torch.manual_seed(algo.config.seed)
        self.algo, self.weights, self.shards = algo, weights, shards
        env = make_env(algo.config.env_id, algo.config.seed, algo.action_kind, algo.name)
        self.learner = algo.make_learner(env, torch.device(device))
        env.close()
        self.rng = np.random.default_rng(algo.config.seed + 7)
        self.totals: np.ndarray | None = None
        self.mins: np.ndarray | None = None

    def ping(self) -> bool:
        return True

    def publish(self) -> int:
        """Send the current priority weights (online and target) to the parameter server."""
        self.weights.publish(self.learner.get_priority_weights())
        self.weights.flush()
        return self.learner.updates

    def train(self, num_updates: int, progress: float) -> dict[str, Any]:
        """``num_updates`` importance-weighted updates, sampled in proportion to the shards'
        total priorities (as last reported), with ``beta = beta_at(progress)``.

        The batches of one call are drawn together, so the later ones do not yet see the
        priorities the earlier ones produced: a staleness of at most ``num_updates`` batches
        that Ape-X's own prefetching learner accepts too.

        Returns:
            ``{"updates", "loss", "mean_td_error", "beta", "weights"}``: ``weights`` are the
            online network's after these updates (what the driver evaluates).
        """
        cfg, apex = self.algo.config, self.algo.apex
        beta = beta_at(progress, apex.beta_start)
        if self.totals is None:
            stats = self.shards.stats()
            self.totals = np.array([s[0] for s in stats])
            self.mins = np.array([s[1] for s in stats])
        counts = np.stack([split_by_priority(self.totals, cfg.batch_size, self.rng)
                           for _ in range(num_updates)], axis=1)  # (K, num_updates)
        answers = self.shards.sample_many(counts, beta)
        self.totals = np.array([a[1] for a in answers])
        self.mins = np.array([a[2] for a in answers])
        losses, td_means, new_td = [], [], [[] for _ in answers]
        for m in range(num_updates):
            parts = [(k, a[0][m]) for k, a in enumerate(answers) if a[0][m] is not None]
            batch = NStepBatch(*(np.concatenate(f) for f in zip(*(p.batch for _, p in parts))))
            prios = np.concatenate([p.priorities for _, p in parts])
            weights = importance_weights(prios, float(self.mins.min()), beta)
            metrics, td = self.learner.update_prioritized(batch, weights)
            losses.append(float(self.algo.loss_of(metrics)))
            td_means.append(float(np.mean(td)))
            start = 0
            for k, p in parts:
                new_td[k].append((p.ids, td[start:start + len(p.ids)]))
                start += len(p.ids)
            if self.learner.updates % apex.publish_every == 0:
                self.weights.publish(self.learner.get_priority_weights())
        for k, pairs in enumerate(new_td):
            if pairs:
                self.shards.update_priorities(k, np.concatenate([i for i, _ in pairs]),
                                              np.concatenate([t for _, t in pairs]))
        return {"updates": self.learner.updates, "loss": float(np.mean(losses)),
                "mean_td_error": float(np.mean(td_means)), "beta": beta,
                "weights": self.learner.get_weights()}
