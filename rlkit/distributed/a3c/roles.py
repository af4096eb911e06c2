"""The gradient-server roles, as plain classes: :class:`GradientWorker` computes a gradient on
its copy of the weights and sends it as one flat float32 array; :class:`GradientServer` applies
gradients and counts each one's *staleness* (updates applied between the version the worker
computed on and the moment its gradient lands). ``ray.remote(Cls)`` makes them actors; the
drivers are in :mod:`rlkit.distributed.a3c.driver`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from rlkit.algos.a2c import A2CConfig, A2CLearner
from rlkit.algos.actor_critic import sampling_policy
from rlkit.core.common import worker_seed
from rlkit.core.types import Weights
from rlkit.envs.make import make_env, space_dims
from rlkit.envs.runner import EnvRunner, Fragment
from rlkit.train.learner_state import SavesLearner


class WeightsMessage(NamedTuple):
    weights: Weights
    version: int  # updates applied to produce these weights


class ServerStats(NamedTuple):
    """The gradient server's counters (:meth:`GradientServer.stats`)."""

    updates: int  # gradients applied (the weights version)
    staleness: list[int]  # per arriving gradient: updates applied since its weights version
    senders: list[int]  # the worker index of each of those gradients
    skipped: int  # non-finite gradients not applied


class GradientMessage(NamedTuple):
    gradient: np.ndarray  # (num_parameters,) float32, clipped
    version: int  # the weights version it was computed on
    worker_index: int
    env_steps: int
    episode_returns: list[float]  # episodes that finished inside the fragment
    loss: float


class GradientWorker:
    """Steps ``envs_per_worker`` environments in lockstep and turns each fragment into a gradient.

    Args:
        config: Run settings.
        worker_index: ``i``; its envs and its action sampling are seeded with
            :func:`rlkit.core.common.worker_seed`.
        env_id: Overrides ``config.env_id`` (e.g. a slow variant for one worker).
        restart: Which incarnation this is: its restarts, plus 1000 per resume of the run
            (a fresh random stream each time; :func:`~rlkit.core.common.worker_seed`).
    """

    def __init__(self, config: A2CConfig, worker_index: int, env_id: str | None = None,
                 restart: int = 0) -> None:
        torch.set_num_threads(config.torch_threads)
        self.config, self.index = config, worker_index
        seed = worker_seed(config.seed, worker_index, restart)
        self.runner = EnvRunner(env_id or config.env_id, seed, "discrete", "A2C",
                                config.envs_per_worker)
        self.learner = A2CLearner(self.runner.obs_dim, self.runner.action_dim, config)
        self.policy = sampling_policy(self.learner.net, np.random.default_rng(seed))

    def ping(self) -> int:
        return self.index

    def collect(self) -> Fragment:
        """``n_steps`` vector steps of every env with the current weights (the fixed on-policy
        shape; a reset row is marked, see :class:`rlkit.envs.runner.Fragment`)."""
        return self.runner.run(self.config.n_steps, self.policy, fixed_length=True)

    def compute_gradient(self, message: WeightsMessage) -> GradientMessage:
        """Load ``message``'s weights, collect one fragment with them, return its gradient."""
        self.learner.set_weights(message.weights)
        fragment = self.collect()
        gradient = self.learner.compute_gradient(fragment)
        report = self.learner.last_report
        return GradientMessage(gradient, message.version, self.index, fragment.num_steps,
                               fragment.episode_returns, report.policy + report.value)


class GradientServer(SavesLearner):
    """Holds the weights and the optimiser; applies gradients, counting staleness and skips.

    A gradient with a NaN or inf entry is not applied: it is counted in ``skipped`` and the
    current weights are returned unchanged.
    """

    def __init__(self, config: A2CConfig) -> None:
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        probe = make_env(config.env_id, config.seed, "discrete", "A2C")
        self.learner = A2CLearner(*space_dims(probe), config)
        probe.close()
        self.staleness: list[int] = []  # one entry per arriving gradient
        self.senders: list[int] = []  # the worker index of each of those gradients
        self.skipped = 0

    def ping(self) -> bool:
        return True

    @property
    def version(self) -> int:
        return self.learner.updates

    def weights(self) -> WeightsMessage:
        return WeightsMessage(self.learner.get_weights(), self.version)

    def apply(self, message: GradientMessage) -> WeightsMessage:
        """A3C: apply one gradient as it arrives and answer with the new weights."""
        return self.apply_mean(message)

    def apply_mean(self, *messages: GradientMessage) -> WeightsMessage:
        """A2C: average the gradients of one round (all on the same version), apply once."""
        finite = []
        for m in messages:
            self.staleness.append(self.version - m.version)
            self.senders.append(m.worker_index)
            if np.isfinite(m.gradient).all():
                finite.append(m.gradient)
            else:
                self.skipped += 1
        if finite:
            self.learner.apply_gradient(np.mean(np.stack(finite), axis=0))
        return self.weights()

    def stats(self) -> ServerStats:
        return ServerStats(self.version, list(self.staleness), list(self.senders), self.skipped)
