"""The gradient-server roles, as plain classes: :class:`GradientWorker` computes a gradient on
its copy of the weights and sends it as one flat float32 array; :class:`GradientServer` applies
gradients and counts each one's *staleness* (updates applied between the version the worker
computed on and the moment its gradient lands). ``ray.remote(Cls)`` makes them actors; the
drivers are in :mod:`rlkit.distributed.gradient_server`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from rlkit.algos.a2c import A2CConfig, A2CLearner, Fragment
from rlkit.envs import make_env, space_dims
from rlkit.types import Weights

class WeightsMessage(NamedTuple):
    weights: Weights
    version: int  # updates applied to produce these weights


class GradientMessage(NamedTuple):
    gradient: np.ndarray  # (num_parameters,) float32, clipped
    version: int  # the weights version it was computed on
    worker_index: int
    env_steps: int
    episode_returns: list[float]  # episodes that finished inside the fragment
    loss: float


class GradientWorker:
    """Steps ``num_envs`` environments in lockstep and turns each fragment into a gradient.

    Args:
        config: Run settings.
        worker_index: ``i``; env ``j`` is seeded ``seed + 1000 * (i + 1) + 100_000 * restart
            + j``, so workers, and a replaced worker and the one it replaces, never share a
            random stream.
        env_id: Overrides ``config.env_id`` (e.g. a slow variant for one worker).
        restart: Which incarnation of worker ``i`` this is (0 for the first).
    """

    def __init__(self, config: A2CConfig, worker_index: int, env_id: str | None = None,
                 restart: int = 0) -> None:
        torch.set_num_threads(config.torch_threads)
        self.config, self.index = config, worker_index
        seed = config.seed + 1000 * (worker_index + 1) + 100_000 * restart
        self.envs = [make_env(env_id or config.env_id, seed + j, "discrete", "A2C")
                     for j in range(config.num_envs)]
        self.learner = A2CLearner(*space_dims(self.envs[0]), config)
        self.generator = torch.Generator().manual_seed(seed)
        self.obs = np.stack([e.reset(seed=seed + j)[0] for j, e in enumerate(self.envs)])
        self.running = np.zeros(config.num_envs)

    def ready(self) -> int:
        return self.index

    def collect(self) -> tuple[Fragment, list[float]]:
        """``n_steps`` steps of every env with the current weights; returns the fragment and
        the returns of episodes that ended in it. An episode ends on termination or truncation;
        the reset observation becomes the next one and a truncated episode's real final
        observation is kept in ``final_obs``."""
        t_max, n = self.config.n_steps, self.config.num_envs
        obs = np.zeros((t_max, *self.obs.shape), np.float32)
        final_obs = np.zeros_like(obs)
        actions = np.zeros((t_max, n), np.int64)
        rewards, terms, truncs = (np.zeros((t_max, n), np.float32) for _ in range(3))
        finished: list[float] = []
        for t in range(t_max):
            obs[t] = self.obs
            with torch.no_grad():
                logits = self.learner.net.actor(torch.as_tensor(obs[t]))
            actions[t] = torch.multinomial(logits.softmax(-1), 1, generator=self.generator)[:, 0]
            for j, env in enumerate(self.envs):
                next_obs, reward, terminated, truncated, _ = env.step(int(actions[t, j]))
                rewards[t, j], terms[t, j] = reward, terminated
                truncs[t, j] = truncated and not terminated
                self.running[j] += reward
                if terminated or truncated:
                    final_obs[t, j] = next_obs
                    finished.append(float(self.running[j]))
                    self.running[j] = 0.0
                    next_obs, _ = env.reset()
                self.obs[j] = next_obs
        return Fragment(obs, actions, rewards, terms, truncs, final_obs, self.obs.copy()), finished

    def compute_gradient(self, message: WeightsMessage) -> GradientMessage:
        """Load ``message``'s weights, collect one fragment with them, return its gradient."""
        self.learner.set_weights(message.weights)
        fragment, finished = self.collect()
        gradient = self.learner.compute_gradient(fragment)
        loss = self.learner.last_metrics
        return GradientMessage(gradient, message.version, self.index, fragment.rewards.size,
                               finished, loss["policy"] + loss["value"])


class GradientServer:
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

    def stats(self) -> dict[str, Any]:
        return {"updates": self.version, "staleness": list(self.staleness),
                "senders": list(self.senders), "skipped": self.skipped}
