"""Throughput probes: rollouts (naive per-step Ray design against the batched one, learner
off) and learner updates per second on each device.

Both designs do the same work per env step: a Q-network forward pass for an epsilon-greedy
action, one environment step, and delivery of the transition to a replay-buffer actor. They
differ only in how often they talk to other processes:

* naive (the seed blog's design): one ``buffer.add.remote(...)`` per env step, and the
  latest weights fetched from the parameter server at every episode start;
* batched (rlkit's design): ``fragment_steps`` steps per call, delivered as one array batch, and
  weights fetched only when the parameter server's version changed.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from rlkit.algos.dqn import DQNConfig, DQNLearner, DQNSpec, epsilon_greedy_policy
from rlkit.core.common import worker_seed
from rlkit.core.networks import QNetwork, load_numpy_weights
from rlkit.distributed.off_policy.roles import RolloutWorker
from rlkit.distributed.runtime.placement import plan_resources
from rlkit.distributed.runtime.parameter_server import (ParameterServer, RayChannel, pack_weights,
                                                        unpack_weights)
from rlkit.envs.make import make_env, space_dims
from rlkit.replay.buffers import ReplayBuffer

EPSILON = 0.1  # exploration rate used while measuring (a forward pass on 90% of steps)
TIMEOUT_S = 120.0  # longest wait for any actor here; a stuck probe raises GetTimeoutError


class NaiveRolloutWorker:
    """The seed design: every transition is its own remote call to the buffer actor."""

    def __init__(self, config: DQNConfig, worker_index: int, parameter_server: Any,
                 buffer: Any) -> None:
        torch.set_num_threads(1)
        seed = worker_seed(config.seed, worker_index)
        self.env = make_env(config.env_id, seed, "discrete", "DQN")
        obs_dim, n_actions = space_dims(self.env)
        self.q = QNetwork(obs_dim, n_actions, config.hidden)
        self.policy = epsilon_greedy_policy(self.q, n_actions, np.random.default_rng(seed),
                                            lambda: EPSILON)
        self.ps, self.buffer = parameter_server, buffer

    def run_for(self, seconds: float) -> int:
        """Step for ``seconds`` of wall time; return the number of env steps taken."""
        import ray

        steps, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            # the latest weights at every episode start, as the seed design did
            version, payload = ray.get(self.ps.get_if_newer.remote(0), timeout=TIMEOUT_S)
            load_numpy_weights(self.q, unpack_weights(payload, TIMEOUT_S))
            obs, _ = self.env.reset()
            done = False
            while not done and time.perf_counter() < deadline:
                action = int(self.policy(obs[None])[0])
                next_obs, reward, terminated, truncated, _ = self.env.step(action)
                self.buffer.add.remote(obs, action, reward, next_obs, terminated)  # per step!
                obs, done, steps = next_obs, terminated or truncated, steps + 1
        # wait until every add has been delivered
        ray.get(self.buffer.__len__.remote(), timeout=TIMEOUT_S)
        return steps


def _cluster(config: DQNConfig, num_workers: int) -> tuple[Any, Any, float]:
    """A parameter server holding version-1 weights, a buffer actor, and the per-worker CPUs."""
    import ray

    probe = make_env(config.env_id, config.seed)
    obs_dim, n_actions = space_dims(probe)
    probe.close()
    ps = ray.remote(ParameterServer).options(num_cpus=0).remote()
    weights = DQNLearner(obs_dim, n_actions, config).get_weights()
    ray.get(ps.publish.remote(pack_weights(weights)), timeout=TIMEOUT_S)
    buffer = ray.remote(ReplayBuffer).options(num_cpus=0).remote(100_000, obs_dim)
    cpus = plan_resources(num_workers, ray.cluster_resources()["CPU"]).worker_cpus
    return ps, buffer, cpus


def naive_rollout_throughput(config: DQNConfig, seconds: float = 5.0) -> float:
    """Env steps per second of one naive worker (one remote call per step)."""
    import ray

    ps, buffer, cpus = _cluster(config, 1)
    worker = ray.remote(NaiveRolloutWorker).options(num_cpus=cpus).remote(config, 0, ps, buffer)
    try:
        # warm-up: process start, first imports
        ray.get(worker.run_for.remote(0.2), timeout=TIMEOUT_S)
        start = time.perf_counter()
        steps = ray.get(worker.run_for.remote(seconds), timeout=seconds + TIMEOUT_S)
        return steps / (time.perf_counter() - start)
    finally:
        for handle in (worker, buffer, ps):
            ray.kill(handle, no_restart=True)


def batched_rollout_throughput(config: DQNConfig, num_workers: int = 1, seconds: float = 5.0,
                               fragment_steps: int = 1000, envs_per_worker: int = 8,
                               calls_in_flight: int = 2) -> float:
    """Env steps per second of ``num_workers`` batched workers feeding one buffer actor.

    Each worker steps ``envs_per_worker`` envs in lockstep and returns ``fragment_steps``
    transitions per call; the driver hands each fragment's reference to the buffer actor
    (``add_batch``) and queues the worker's next call at once. ``calls_in_flight`` calls are
    kept queued per worker (pipelining), so a worker never idles while the driver handles
    the fragment it just returned.
    """
    import ray

    ps, buffer, cpus = _cluster(config, num_workers)
    workers = [ray.remote(RolloutWorker).options(num_cpus=cpus).remote(
        DQNSpec(config), i, RayChannel(ps, TIMEOUT_S), 0, envs_per_worker)
        for i in range(num_workers)]
    try:
        ray.get([w.collect.options(num_returns=2).remote(10, EPSILON)[1] for w in workers],
                timeout=TIMEOUT_S)
        steps, adds, pending = 0, [], {}

        def launch(i: int) -> None:
            batch_ref, stats_ref = workers[i].collect.options(num_returns=2).remote(
                fragment_steps, EPSILON)
            pending[stats_ref] = (i, batch_ref)

        start = time.perf_counter()
        for i in range(num_workers):
            for _ in range(calls_in_flight):
                launch(i)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=TIMEOUT_S)
            if not ready:
                raise TimeoutError(f"no rollout worker answered within {TIMEOUT_S} s")
            ref = ready[0]
            i, batch_ref = pending.pop(ref)
            steps += ray.get(ref, timeout=TIMEOUT_S).env_steps
            adds.append(buffer.add_batch.remote(batch_ref))
            if time.perf_counter() - start < seconds:
                launch(i)
        ray.get(adds, timeout=TIMEOUT_S)  # every fragment delivered to the buffer
        return steps / (time.perf_counter() - start)
    finally:
        for handle in [*workers, buffer, ps]:
            ray.kill(handle, no_restart=True)


def single_process_throughput(config: DQNConfig, seconds: float = 3.0,
                              envs_per_worker: int = 8, epsilon: float = EPSILON,
                              barrier: Any = None) -> float:
    """Env steps per second of the same rollout loop in this process, no Ray: the ceiling one
    worker could reach if inter-process communication were free.

    Args:
        config, seconds, envs_per_worker: The run's settings, the measuring time, the envs.
        epsilon: The exploration rate while measuring.
        barrier: If given (a ``multiprocessing.Barrier``), wait at it after the warm-up, so
            that several processes measure over the same interval.
    """
    worker = RolloutWorker(DQNSpec(config), 0, num_envs=envs_per_worker)
    worker.collect(10, epsilon)
    if barrier is not None:
        barrier.wait(timeout=TIMEOUT_S)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += worker.collect(1000, epsilon)[1].env_steps
    return steps / (time.perf_counter() - start)


def sac_learner_updates_per_second(device: str = "cpu", seconds: float = 3.0,
                                   batch_size: int = 256, hidden: tuple[int, ...] = (256, 256),
                                   threads: int = 1, host_buffer: bool = False,
                                   compile_losses: bool = False,
                                   freeze_critics: bool = True, cuda_graph: bool = False) -> float:
    """Gradient updates per second of the SAC learner alone, sampling from a full buffer.

    By default the buffer (100k Pendulum-sized transitions) lives on ``device``, so each update
    samples and trains without a host-device copy or a host sync; the clock stops after a
    device synchronisation, so queued GPU work is counted.

    Args:
        device: ``"cpu"`` or ``"cuda"``.
        seconds: How long to measure (after a warm-up).
        batch_size, hidden: The learner's batch size and network widths.
        threads: Torch CPU threads.
        host_buffer: Sample from a numpy buffer in host memory and copy each batch to
            ``device`` (the design the device-resident buffer replaces), for comparison.
        compile_losses: ``SACConfig.compile_losses``; the compilation happens in the warm-up,
            before the clock starts.
        freeze_critics: ``SACLearner.freeze_critics_in_actor_step`` (``False`` measures the
            critics' weight gradients that the actor step would compute for nothing).
        cuda_graph: Replay the whole update as one CUDA graph (``device="cuda"`` only; the
            capture happens in the warm-up).
    """
    from rlkit.algos.sac import SACConfig, SACLearner
    from rlkit.algos.sac_graph import SACGraphUpdate
    from rlkit.core.types import Batch, TensorBatch
    from rlkit.replay.buffers import ReplayBuffer, TensorReplayBuffer

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        config = SACConfig(hidden=hidden, batch_size=batch_size,
                           learning_starts=max(1_000, batch_size), compile_losses=compile_losses,
                           cuda_graph=cuda_graph)
        learner = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), config, device)
        learner.freeze_critics_in_actor_step = freeze_critics
        host = ReplayBuffer(100_000, 3, 1) if host_buffer else None
        buffer = host if host is not None else TensorReplayBuffer(100_000, 3, 1, device)
        rng = np.random.default_rng(0)
        n = 100_000
        buffer.add_batch(Batch(rng.normal(size=(n, 3)).astype(np.float32),
                               rng.uniform(-2, 2, size=(n, 1)).astype(np.float32),
                               rng.normal(size=n).astype(np.float32),
                               rng.normal(size=(n, 3)).astype(np.float32),
                               np.zeros(n, np.float32)))

        def sync() -> None:
            if learner.device.type == "cuda":
                torch.cuda.synchronize(learner.device)

        def sample() -> TensorBatch:
            if host is None:
                return buffer.sample(batch_size)
            b = host.sample(batch_size)  # numpy on the host: copy every field to the device
            return TensorBatch(*(torch.as_tensor(x, device=learner.device) for x in b))

        if cuda_graph:
            graph = SACGraphUpdate(learner, buffer, batch_size)

            def step() -> None:
                graph.replay()
        else:
            def step() -> None:
                learner.update(sample())
        for _ in range(20):
            step()
        sync()
        updates, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(10):
                step()
            updates += 10
            sync()
        return updates / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous_threads)
