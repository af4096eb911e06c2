"""The distributed roles of the off-policy pattern, as plain classes first and Ray actors second.

Every role is an ordinary Python class, so tests (and curious readers) can drive it in one
process; ``ray.remote(Role)`` turns it into an actor unchanged, and :mod:`rlkit.distributed.
driver` wires the actors together. An :class:`rlkit.core.types.OffPolicyAlgorithm` supplies the
networks, the exploration and the learner. They reach the parameter server through a weights channel
(:mod:`rlkit.distributed.runtime.parameter_server`), the same code in one process and under Ray.

Data flow: rollout workers step their own environments with the newest weights they have and
return transitions in fragments of many steps; the driver forwards each fragment's object
reference to the learner, which owns the replay buffer (so sampling a batch is a local index,
never a remote call), runs the number of updates the rate limiter allows, and publishes new
weights every ``publish_every`` updates; workers take weights only when a newer version exists.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, NamedTuple

import numpy as np
import torch

from rlkit.algos.sac_graph import SACGraphUpdate
from rlkit.core.common import check_finite, role_seed, worker_seed
from rlkit.core.networks import device_label, load_numpy_weights
from rlkit.core.types import Batch, FragmentStats, NStepBatch, OffPolicyAlgorithm, Weights
from rlkit.distributed.runtime.host_copy import HostCopy
from rlkit.distributed.runtime.learner_group import GroupMember
from rlkit.distributed.runtime.parameter_server import Newer, WeightsChannel
from rlkit.envs.make import make_env
from rlkit.envs.runner import EnvRunner
from rlkit.replay.nstep import FragmentTransitions
from rlkit.train.learner_state import LearnerState, load_learner_state, to_cpu

__all__ = ["LearnerReport", "OffPolicyLearner", "RolloutWorker", "learner_device"]


class LearnerReport(NamedTuple):
    """What :meth:`OffPolicyLearner.add_and_train` returns.

    Attributes:
        updates: Gradient updates so far.
        loss: Mean loss of this call's updates (NaN if it ran none).
        buffer_size: Transitions in the replay buffer.
        seconds: Time spent in the call.
    """

    updates: int
    loss: float
    buffer_size: int
    seconds: float


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
        algo: The algorithm (holds the run's config: env id, network shape, seed).
        worker_index: ``i``; the worker seeds its envs and RNG with
            :func:`rlkit.core.common.worker_seed`, so workers never share a random stream.
        weights: The channel to the parameter server, or ``None`` (then weights come only
            through :meth:`set_weights`).
        restart: Which incarnation of this worker index this is: its restarts, plus 1000 for
            each time the run was resumed from a checkpoint, so every incarnation has its own
            random stream.
        num_envs: Environments the worker steps in lockstep (one forward pass for all).
    """

    def __init__(self, algo: OffPolicyAlgorithm, worker_index: int,
                 weights: WeightsChannel | None = None, restart: int = 0,
                 num_envs: int = 1) -> None:
        torch.set_num_threads(1)
        self.index = worker_index
        seed = worker_seed(algo.config.seed, worker_index, restart)
        torch.manual_seed(seed)
        self.runner = EnvRunner(algo.config.env_id, seed, algo.action_kind, algo.name, num_envs,
                                algo.images)
        self.transitions = FragmentTransitions(algo.config, num_envs)  # one-step or n-step
        self.net = algo.make_policy_network(self.runner.env).requires_grad_(False)
        self.random_action_prob = 1.0
        self.policy = algo.exploration_policy(self.net, self.runner.env,
                                              np.random.default_rng(seed),
                                              lambda: self.random_action_prob)
        self.weights = weights
        self.version = 0

    def set_weights(self, weights: Weights, version: int) -> None:
        load_numpy_weights(self.net, weights)
        self.version = version

    def sync_weights(self) -> None:
        """Take a newer weights version from the parameter server, if it holds one.

        Under Ray the channel answers from the question it sent at the previous sync, so the
        round trip overlaps acting, at the cost of acting on weights at most one fragment
        staler (see :class:`rlkit.distributed.runtime.parameter_server.RayChannel`).
        """
        newer: Newer = None if self.weights is None else self.weights.poll(self.version)
        if newer is not None:
            self.set_weights(newer[1], newer[0])

    def collect(self, num_steps: int, random_action_prob: float
                ) -> tuple[Batch | NStepBatch, FragmentStats]:
        """Sync weights, then take at least ``num_steps`` env steps in all: ``ceil(num_steps /
        num_envs) * num_envs``, plus fewer than ``num_envs`` more when some env spent a step on
        its next-step reset (see :class:`rlkit.envs.runner.EnvRunner`).

        Args:
            num_steps: Transitions to collect.
            random_action_prob: Probability of a uniformly random action for this fragment
                (:meth:`rlkit.core.types.OffPolicyAlgorithm.random_action_prob`).

        Returns:
            ``(batch, stats)``: the transitions to store (n-step ones when the config's
            ``n_step > 1``; their windows may reach back into the previous fragment) and the
            fragment's statistics (``stats.env_steps`` counts env steps). Under Ray, call
            with ``.options(num_returns=2)`` so the driver
            can read the stats and pass the batch's reference on to the learner unread.
        """
        start = time.perf_counter()
        self.sync_weights()
        self.random_action_prob = float(random_action_prob)
        fragment = self.runner.run(-(-num_steps // self.runner.num_envs), self.policy)
        stats = FragmentStats(self.index, len(fragment.batch), fragment.episode_returns,
                              self.version, time.perf_counter() - start)
        return self.transitions(fragment), stats

    def ping(self) -> int:
        return self.index


class OffPolicyLearner(GroupMember):
    """Owns the replay buffer and the algorithm's learner; trains as many steps as it is told.
    In a learner group of ``world_size`` ranks, each rank keeps rows ``rank::world_size`` of
    every fragment and samples ``batch_size / world_size`` per update.

    Args:
        algo: The algorithm.
        weights: Where new weights are published every ``publish_every`` updates (or ``None``).
        publish_every: Updates between weight publications.
        device: ``"auto"`` (GPU if visible, else CPU), ``"cpu"`` or ``"cuda"``. The buffer
            lives there too when the algorithm's buffer is a tensor buffer (SAC).
        rank, world_size: This learner's rank and the group's size (1: no group).
        restart: Its incarnation (restarts, plus 1000 per resume): a replay share's sampling
            stream is ``role_seed(seed, "replay share", rank, restart)``.
    """

    def __init__(self, algo: OffPolicyAlgorithm, weights: WeightsChannel | None = None,
                 publish_every: int = 10, device: str = "auto", rank: int = 0,
                 world_size: int = 1, restart: int = 0) -> None:
        self.rank, self.world_size = rank, world_size
        config = algo.config
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        self.algo, self.config = algo, config
        self.device = learner_device(device)
        env = make_env(config.env_id, config.seed, algo.action_kind, algo.name, algo.images)
        self.learner = algo.make_learner(env, self.device)
        if world_size > 1:  # a share of the replay: its own capacity share and sampling seed
            share = dataclasses.replace(config, buffer_size=config.buffer_size // world_size,
                                        seed=role_seed(config.seed, "replay share", rank,
                                                       restart))
            algo = type(algo)(share)
        self.buffer = algo.make_buffer(env, self.device)
        env.close()
        self.graph: SACGraphUpdate | None = None  # SAC on a GPU with cuda_graph=True, alone
        if getattr(config, "cuda_graph", False) and self.device.type == "cuda" \
                and world_size == 1:  # a group's all-reduce cannot be captured in a graph
            self.graph = SACGraphUpdate(self.learner, self.buffer, config.batch_size)
        self.weights = weights
        self.publish_every = publish_every
        self.published_at = 0  # update count of the last publication
        # on a GPU, weights go to the host through pinned buffers, without a device sync
        self.host_copy = (HostCopy(algo.policy_network_of(self.learner))
                          if self.device.type == "cuda" and weights is not None else None)

    def publish(self, wait: bool = True) -> int:
        """Publish the current weights as a new version (a no-op without a channel).

        ``wait=False`` does not wait for the server's answer (the learner keeps training); the
        end of :meth:`add_and_train` waits, so once that returns the server holds every version.
        On a GPU, ``wait=False`` only queues the copy to the host; :meth:`send_copied` sends it
        once it is complete.

        Returns:
            The number of updates the published weights include.
        """
        if self.weights is not None:
            self.published_at = self.learner.updates
            if self.host_copy is not None:
                self.send_copied(wait=True)  # the previous copy, if still unsent
                self.host_copy.start()
                if wait:
                    self.send_copied(wait=True)
            else:
                self.weights.publish(self.learner.get_weights())
            if wait:
                self.weights.flush()
        return self.learner.updates

    def send_copied(self, wait: bool = False) -> None:
        """Publish the weights copy in flight once it is complete (``wait``: wait for it)."""
        copy = self.host_copy
        if copy is not None and copy.in_flight and (wait or copy.ready()):
            self.weights.publish(copy.take())

    def add_and_train(self, batch: Batch, num_updates: int) -> LearnerReport:
        """Store ``batch`` in the buffer, then run ``num_updates`` gradient updates.

        The losses stay on the learner's device until the end of the call: one host sync per
        call, not per update.

        Returns:
            A :class:`LearnerReport`.

        Raises:
            FloatingPointError: if the loss became NaN or infinite.
        """
        start, ranks = time.perf_counter(), self.world_size
        self.buffer.add_batch(batch if ranks == 1 else type(batch)(*(
            column[self.rank::ranks] for column in batch)))  # this rank's share
        losses = []
        for _ in range(num_updates):
            if self.graph is not None:
                self.graph.replay()  # the whole update, one CUDA graph
            else:
                report = self.learner.update(self.buffer.sample(self.config.batch_size // ranks))
                losses.append(torch.as_tensor(report.loss))
            if self.learner.updates - self.published_at >= self.publish_every:
                self.publish(wait=False)
            self.send_copied()
        if self.weights is not None:
            self.send_copied(wait=True)
            self.weights.flush()
        if self.graph is not None and num_updates:
            sums, count = self.graph.take_sums()  # the graph summed the losses on the device
            loss = float(sums.loss) / count
        else:
            loss = float(torch.stack(losses).mean()) if losses else float("nan")
        if num_updates:
            check_finite({"loss": loss}, self.learner.updates, self.algo.name)
        return LearnerReport(self.learner.updates, loss, len(self.buffer),
                             time.perf_counter() - start)

    def get_weights(self) -> Weights:
        return self.learner.get_weights()

    def state(self, include_buffer: bool) -> LearnerState:
        """The learner's (and buffer's) state on the CPU, for a checkpoint (see
        :mod:`rlkit.train.checkpoint`)."""
        if self.weights is not None:
            self.weights.flush()
        return LearnerState(to_cpu(self.learner.state_dict()),
                            to_cpu(self.buffer.state_dict()) if include_buffer else None)

    def restore(self, learner_state: dict[str, Any], buffer_state: dict[str, Any] | None
                ) -> int:
        """Load a checkpoint's learner (and buffer, if saved); return the update count."""
        load_learner_state(self.learner, learner_state)
        if self.graph is not None:
            self.graph.invalidate()  # the optimisers' state tensors were replaced: recapture
        if buffer_state is not None:
            self.buffer.load_state_dict(buffer_state)
        self.published_at = self.learner.updates
        return self.learner.updates

    def num_updates(self) -> int:
        return self.learner.updates

    def num_stored(self) -> int:
        """Transitions in the replay buffer (at most its capacity)."""
        return len(self.buffer)

    def ping(self) -> bool:
        return True

    def device_name(self) -> str:
        """The learner's device, e.g. ``"cpu"`` or ``"cuda: NVIDIA H100 80GB HBM3"``."""
        return device_label(self.device)
