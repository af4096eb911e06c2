"""The distributed roles, as plain classes first and Ray actors second.

Every role is an ordinary Python class, so tests (and curious readers) can drive it in one
process; ``ray.remote(Role)`` turns it into an actor unchanged, and :mod:`rlkit.parallel` wires
the actors together. The roles are written once for every algorithm: an algorithm spec
(:mod:`rlkit.algorithms`) supplies the networks, the exploration and the learner.

Data flow: rollout workers step their own environments with the newest weights they have and
return transitions in fragments of many steps; the driver forwards each fragment's object
reference to the learner, which owns the replay buffer (so sampling a batch is a local index,
never a remote call), runs the number of updates the rate limiter allows, and publishes new
weights to the parameter server every ``publish_every`` updates; workers fetch weights only
when the server's version is newer than theirs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlkit.algorithms import AlgorithmSpec
from rlkit.buffers import Batch
from rlkit.checkpoint import to_cpu
from rlkit.envs import make_env
from rlkit.evaluation import evaluate_policy
from rlkit.networks import load_numpy_weights
from rlkit.rollout import EnvRunner
from rlkit.sac import check_finite

Weights = dict[str, np.ndarray]

__all__ = ["Evaluator", "FragmentStats", "LearnerWorker", "RolloutWorker", "learner_device"]


@dataclass
class FragmentStats:
    """The small part of a fragment the driver reads (the transitions go to the learner)."""

    worker_index: int
    num_steps: int
    episode_returns: list[float]
    weights_version: int
    seconds: float


def _unwrap(payload: Any, timeout_s: float) -> Weights:
    """Weights from a parameter-server payload: plain dict, or ``[ObjectRef]`` under Ray."""
    if isinstance(payload, list):
        import ray

        return ray.get(payload[0], timeout=timeout_s)
    return payload


def learner_device(device: str = "auto") -> torch.device:
    """``"cpu"``, ``"cuda"``, or ``"auto"``: the GPU when this process can see one, else the CPU.

    Under Ray, an actor given ``num_gpus=1`` sees exactly its GPU (Ray sets
    ``CUDA_VISIBLE_DEVICES``), but in Ray 2.60 an actor given ``num_gpus=0`` is *not* hidden from
    the machine's GPUs, so ``"auto"`` would pick one it never reserved: the driver passes the
    device explicitly.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class RolloutWorker:
    """Steps its own environments with the algorithm's exploration policy; returns fragments.

    Args:
        spec: The algorithm spec (holds the run's config: env id, network shape, seed).
        worker_index: ``i``; the worker seeds its envs and RNG with ``seed + 1000 * (i+1)``
            (plus ``100_000 * restart`` after a restart) so workers never share a random stream.
        parameter_server: A :class:`rlkit.parameter_server.ParameterServer`, a Ray handle to
            one, or ``None``
            (then weights come only through :meth:`set_weights`).
        restart: Which incarnation of this worker index this is: its restarts, plus 1000 for
            each time the run was resumed from a checkpoint, so every incarnation has its own
            random stream.
        num_envs: Environments the worker steps in lockstep (one forward pass for all).
        timeout_s: Longest wait for the parameter server before raising ``GetTimeoutError``.
    """

    def __init__(self, spec: AlgorithmSpec, worker_index: int, parameter_server: Any = None,
                 restart: int = 0, num_envs: int = 1, timeout_s: float = 120.0) -> None:
        torch.set_num_threads(1)
        self.index = worker_index
        seed = spec.config.seed + 1000 * (worker_index + 1) + 100_000 * restart
        torch.manual_seed(seed)
        self.runner = EnvRunner(spec.config.env_id, seed, spec.action_kind, spec.name, num_envs)
        self.net = spec.make_policy_network(self.runner.envs[0]).requires_grad_(False)
        self.exploration = 1.0
        self.policy = spec.exploration_policy(self.net, self.runner.envs[0],
                                              np.random.default_rng(seed),
                                              lambda: self.exploration)
        self.parameter_server = parameter_server
        self.timeout_s = timeout_s
        self.pending_sync: Any = None  # under Ray: the get_if_newer call sent at the last sync
        self.version = 0

    def set_weights(self, weights: Weights, version: int) -> None:
        load_numpy_weights(self.net, weights)
        self.version = version

    def sync_weights(self) -> None:
        """Take a newer weights version from the parameter server, if it holds one.

        In one process this is a direct call. Under Ray the question "anything newer than my
        version?" is a remote call (about 1 ms), so the worker asks it one fragment *ahead*:
        it reads the answer to the question it sent at the previous sync (ready by now, since a
        fragment takes longer than a round trip), loads the weights if they are newer, and sends
        the next question before acting. The round trip then overlaps the env steps, at the
        cost of acting on weights at most one fragment staler. The very first sync waits, so
        no fragment is collected with untrained initial weights once a version exists.
        """
        ps = self.parameter_server
        if ps is None:
            return
        if not hasattr(ps.get_if_newer, "remote"):
            self._apply(ps.get_if_newer(self.version))
            return
        import ray

        pending, self.pending_sync = self.pending_sync, None
        if pending is None:  # first sync: ask and wait for the answer
            pending = ps.get_if_newer.remote(self.version)
        elif not ray.wait([pending], timeout=0)[0]:  # not back yet: keep acting, ask later
            self.pending_sync = pending
            return
        self._apply(ray.get(pending, timeout=self.timeout_s))
        self.pending_sync = ps.get_if_newer.remote(self.version)  # the answer for next time

    def _apply(self, newer: tuple[int, Any] | None) -> None:
        if newer is not None:
            version, payload = newer
            self.set_weights(_unwrap(payload, self.timeout_s), version)

    def collect(self, num_steps: int, exploration: float) -> tuple[Batch, FragmentStats]:
        """Sync weights, then take ``num_steps`` env steps in total (``ceil(num_steps /
        num_envs)`` per env, so a multiple of ``num_envs``).

        Args:
            num_steps: Transitions to collect.
            exploration: The algorithm's exploration setting for this fragment (DQN: epsilon;
                SAC: the probability of a uniform-random action, 1 during the warm-up).

        Returns:
            ``(batch, stats)``. Under Ray, call with ``.options(num_returns=2)`` so the driver
            can read the stats and pass the batch's reference on to the learner unread.
        """
        start = time.perf_counter()
        self.sync_weights()
        self.exploration = float(exploration)
        fragment = self.runner.run(-(-num_steps // self.runner.num_envs), self.policy)
        stats = FragmentStats(self.index, len(fragment.batch), fragment.episode_returns,
                              self.version, time.perf_counter() - start)
        return fragment.batch, stats

    def ping(self) -> int:
        return self.index


class LearnerWorker:
    """Owns the replay buffer and the algorithm's learner; trains as many steps as it is told.

    Args:
        spec: The algorithm spec.
        parameter_server: Where new weights are published every ``publish_every`` updates.
        publish_every: Updates between weight publications.
        use_ray_put: Store each published version with ``ray.put`` (under Ray).
        device: ``"auto"`` (GPU if visible, else CPU), ``"cpu"`` or ``"cuda"``. The buffer
            lives there too when the algorithm's buffer is a tensor buffer (SAC).
        timeout_s: Longest wait for the parameter server before raising ``GetTimeoutError``.
    """

    def __init__(self, spec: AlgorithmSpec, parameter_server: Any = None,
                 publish_every: int = 10, use_ray_put: bool = False, device: str = "auto",
                 timeout_s: float = 120.0) -> None:
        config = spec.config
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        self.spec, self.config = spec, config
        self.device = learner_device(device)
        env = make_env(config.env_id, config.seed, spec.action_kind, spec.name)
        self.learner = spec.make_learner(env, self.device)
        self.buffer = spec.make_buffer(env, self.device)
        env.close()
        self.parameter_server = parameter_server
        self.publish_every = publish_every
        self.use_ray_put = use_ray_put
        self.timeout_s = timeout_s
        self.published_at = 0  # update count of the last publication
        self.pending_publish: Any = None

    def publish(self, wait: bool = True) -> int:
        """Publish the current weights as a new version (a no-op without a server).

        Under Ray (``use_ray_put``) the weights are stored once with ``ray.put`` and the server
        gets the reference. ``wait=False`` does not wait for the server's answer (the learner
        keeps training); the pending call is awaited by the next ``wait=True`` publish or at the
        end of :meth:`add_and_train`, so once that returns the server holds every version.

        Returns:
            The number of updates the published weights include.
        """
        ps = self.parameter_server
        if ps is None:
            return self.learner.updates
        self.published_at = self.learner.updates
        weights = self.learner.get_weights()
        if self.use_ray_put:
            import ray

            self.pending_publish = ps.publish.remote([ray.put(weights)])
            if wait:
                self.flush()
        else:
            ps.publish(weights)
        return self.published_at

    def flush(self) -> None:
        """Wait until the parameter server has received the last publication."""
        if self.pending_publish is not None:
            import ray

            ray.get(self.pending_publish, timeout=self.timeout_s)
            self.pending_publish = None

    def add_and_train(self, batch: Batch, num_updates: int) -> dict[str, float]:
        """Store ``batch`` in the buffer, then run ``num_updates`` gradient updates.

        The losses stay on the learner's device until the end of the call: one host sync per
        call, not per update.

        Returns:
            ``{"updates": total so far, "loss": mean loss of these updates (NaN if none),
            "buffer_size", "seconds"}``.

        Raises:
            FloatingPointError: if the loss became NaN or infinite.
        """
        start = time.perf_counter()
        self.buffer.add_batch(batch)
        losses = []
        for _ in range(num_updates):
            metrics = self.learner.update(self.buffer.sample(self.config.batch_size))
            losses.append(torch.as_tensor(self.spec.loss_of(metrics)))
            if self.learner.updates - self.published_at >= self.publish_every:
                self.publish(wait=False)
        self.flush()
        loss = float(torch.stack(losses).mean()) if losses else float("nan")
        if losses:
            check_finite({"loss": loss}, self.learner.updates)
        return {"updates": float(self.learner.updates), "loss": loss,
                "buffer_size": float(len(self.buffer)),
                "seconds": time.perf_counter() - start}

    def get_weights(self) -> Weights:
        return self.learner.get_weights()

    def state(self, include_buffer: bool) -> dict[str, Any]:
        """``{"learner": state_dict, "buffer": state_dict or None}`` on the CPU, for a
        checkpoint (see :mod:`rlkit.checkpoint`)."""
        self.flush()
        return to_cpu({"learner": self.learner.state_dict(),
                       "buffer": self.buffer.state_dict() if include_buffer else None})

    def restore(self, learner_state: dict[str, Any], buffer_state: dict[str, Any] | None
                ) -> int:
        """Load a checkpoint's learner (and buffer, if saved); return the update count."""
        self.learner.load_state_dict(learner_state)
        if buffer_state is not None:
            self.buffer.load_state_dict(buffer_state)
        self.published_at = self.learner.updates
        return self.learner.updates

    def num_updates(self) -> int:
        return self.learner.updates

    def device_name(self) -> str:
        """The learner's device, e.g. ``"cpu"`` or ``"cuda: NVIDIA H100 80GB HBM3"``."""
        if self.device.type == "cuda":
            return f"cuda: {torch.cuda.get_device_name(self.device)}"
        return "cpu"


class Evaluator:
    """Runs deterministic (greedy) episodes with given weights, in its own process."""

    def __init__(self, spec: AlgorithmSpec) -> None:
        torch.set_num_threads(1)
        self.spec = spec
        env = make_env(spec.config.env_id, spec.config.seed, spec.action_kind, spec.name)
        self.net = spec.make_policy_network(env).requires_grad_(False)
        env.close()

    def ping(self) -> bool:
        return True

    def evaluate(self, weights: Weights, episodes: int, seed: int) -> np.ndarray:
        """``(episodes,)`` returns of the policy with ``weights``, without exploration."""
        load_numpy_weights(self.net, weights)
        return evaluate_policy(self.spec.evaluation_policy(self.net), self.spec.config.env_id,
                               episodes, seed)
