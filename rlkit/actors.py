"""The distributed roles, as plain classes first and Ray actors second.

Every role is an ordinary Python class, so tests (and curious readers) can drive it in one
process. ``ray.remote(Role)`` turns it into an actor unchanged; :mod:`rlkit.parallel` wires the
actors together.

Data flow (DQN): rollout workers step their own environments with the newest weights they have
and return transitions in fragments of many steps; the driver forwards each fragment's object
reference to the learner, which owns the replay buffer (so sampling a batch is a local array
index, never a remote call), runs the number of updates the rate limiter allows, and publishes
new weights to the parameter server every ``publish_every`` updates; workers fetch weights only
when the server's version is newer than theirs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlkit.buffers import Batch, ReplayBuffer
from rlkit.dqn import DQNConfig, DQNLearner, epsilon_greedy_policy, greedy_batch_policy
from rlkit.evaluation import evaluate_policy
from rlkit.networks import QNetwork, load_numpy_weights
from rlkit.parameter_server import ParameterServer
from rlkit.rollout import EnvRunner

Weights = dict[str, np.ndarray]


@dataclass
class FragmentStats:
    """The small part of a fragment the driver reads (the transitions go to the learner)."""

    worker_index: int
    num_steps: int
    episode_returns: list[float]
    weights_version: int
    seconds: float


def _unwrap(payload: Any) -> Weights:
    """Weights from a parameter-server payload: plain dict, or ``[ObjectRef]`` under Ray."""
    if isinstance(payload, list):
        import ray

        return ray.get(payload[0])
    return payload


class DQNRolloutWorker:
    """Steps its own environment with an epsilon-greedy Q-network and returns fragments.

    Args:
        config: The run's DQN config (env id, network shape, seed).
        worker_index: ``i``; the worker seeds its env and RNG with ``config.seed + 1000 * (i+1)``
            (plus ``100_000 * restart`` after a restart) so workers never share a random stream.
        parameter_server: A :class:`ParameterServer` or a Ray handle to one, or ``None``
            (then weights come only through :meth:`set_weights`).
        restart: How many times this worker index has been restarted.
        num_envs: Environments the worker steps in lockstep (one forward pass for all).
    """

    def __init__(self, config: DQNConfig, worker_index: int, parameter_server: Any = None,
                 restart: int = 0, num_envs: int = 1) -> None:
        torch.set_num_threads(1)
        self.index = worker_index
        seed = config.seed + 1000 * (worker_index + 1) + 100_000 * restart
        torch.manual_seed(seed)
        self.runner = EnvRunner(config.env_id, seed, "discrete", "DQN", num_envs)
        self.q = QNetwork(self.runner.obs_dim, self.runner.action_dim, config.hidden)
        self.q.requires_grad_(False)
        self.rng = np.random.default_rng(seed)
        self.epsilon = 1.0
        self.policy = epsilon_greedy_policy(self.q, self.runner.action_dim, self.rng,
                                            lambda: self.epsilon)
        self.parameter_server = parameter_server
        self.version = 0

    def set_weights(self, weights: Weights, version: int) -> None:
        load_numpy_weights(self.q, weights)
        self.version = version

    def sync_weights(self) -> None:
        """Fetch weights from the parameter server if it holds a newer version."""
        ps = self.parameter_server
        if ps is None:
            return
        if hasattr(ps, "get_if_newer") and hasattr(ps.get_if_newer, "remote"):
            import ray

            newer = ray.get(ps.get_if_newer.remote(self.version))
        else:
            newer = ps.get_if_newer(self.version)
        if newer is not None:
            version, payload = newer
            self.set_weights(_unwrap(payload), version)

    def collect(self, num_steps: int, epsilon: float) -> tuple[Batch, FragmentStats]:
        """Sync weights, then take ``num_steps`` epsilon-greedy env steps in total
        (``ceil(num_steps / num_envs)`` per env, so a multiple of ``num_envs``).

        Returns:
            ``(batch, stats)``: the ``num_steps`` transitions and their small summary. Under
            Ray, call with ``.options(num_returns=2)`` so the driver can read the stats and
            pass the batch's reference on to the learner without fetching it.
        """
        start = time.perf_counter()
        self.sync_weights()
        self.epsilon = float(epsilon)
        fragment = self.runner.run(-(-num_steps // self.runner.num_envs), self.policy)
        stats = FragmentStats(self.index, len(fragment.batch), fragment.episode_returns,
                              self.version,
                              time.perf_counter() - start)
        return fragment.batch, stats

    def ping(self) -> int:
        return self.index


class DQNLearnerWorker:
    """Owns the replay buffer and the :class:`DQNLearner`; trains as many steps as it is told.

    Args:
        config: The run's DQN config.
        obs_dim, n_actions: Sizes of the environment.
        parameter_server: Where new weights are published every ``publish_every`` updates.
        publish_every: Updates between weight publications.
        use_ray_put: Store each published version with ``ray.put`` (under Ray).
    """

    def __init__(self, config: DQNConfig, obs_dim: int, n_actions: int,
                 parameter_server: Any = None, publish_every: int = 10,
                 use_ray_put: bool = False) -> None:
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        self.config = config
        self.learner = DQNLearner(obs_dim, n_actions, config)
        self.buffer = ReplayBuffer(config.buffer_size, obs_dim, None, seed=config.seed + 1)
        self.parameter_server = parameter_server
        self.publish_every = publish_every
        self.use_ray_put = use_ray_put
        self.published_at = -1

    def publish(self) -> int:
        """Publish the current weights as a new version (a no-op without a server).

        Returns the new version number from a plain server; under Ray (``use_ray_put``) it
        does not wait for the server and returns the update count the weights belong to.
        """
        ps = self.parameter_server
        if ps is None:
            return 0
        self.published_at = self.learner.updates
        weights = self.learner.get_weights()
        if self.use_ray_put:
            import ray

            # Fire and forget: calls from one caller run in order on the server, so waiting
            # for the new version number would only stall the learner for a round trip.
            ps.publish.remote([ray.put(weights)])
            return self.learner.updates
        return ps.publish(weights)

    def add_and_train(self, batch: Batch, num_updates: int) -> dict[str, float]:
        """Store ``batch`` in the buffer, then run ``num_updates`` gradient updates.

        Returns:
            ``{"updates": total so far, "loss": mean loss of these updates (NaN if none),
            "buffer_size", "seconds"}``.
        """
        start = time.perf_counter()
        self.buffer.add_batch(batch)
        losses = []
        for _ in range(num_updates):
            losses.append(self.learner.update(self.buffer.sample(self.config.batch_size))["loss"])
            if self.learner.updates - self.published_at >= self.publish_every:
                self.publish()
        return {"updates": float(self.learner.updates),
                "loss": float(np.mean(losses)) if losses else float("nan"),
                "buffer_size": float(len(self.buffer)),
                "seconds": time.perf_counter() - start}

    def get_weights(self) -> Weights:
        return self.learner.get_weights()

    def num_updates(self) -> int:
        return self.learner.updates


class DQNEvaluator:
    """Runs greedy episodes with given weights, in its own process."""

    def __init__(self, config: DQNConfig, obs_dim: int, n_actions: int) -> None:
        torch.set_num_threads(1)
        self.config = config
        self.q = QNetwork(obs_dim, n_actions, config.hidden)

    def ping(self) -> bool:
        return True

    def evaluate(self, weights: Weights, episodes: int, seed: int) -> np.ndarray:
        """``(episodes,)`` greedy returns of the network with ``weights``."""
        load_numpy_weights(self.q, weights)
        return evaluate_policy(greedy_batch_policy(self.q), self.config.env_id, episodes, seed)
