"""Drivers that wire the Ray actors of :mod:`rlkit.actors` into a training run."""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlkit.actors import Evaluator, FragmentStats, LearnerWorker, RolloutWorker, Weights
from rlkit.algorithms import AlgorithmSpec, DQNSpec, SACSpec
from rlkit.dqn import DQNConfig, eval_seed
from rlkit.envs import make_env
from rlkit.metrics import History
from rlkit.parameter_server import ParameterServer
from rlkit.sac import SACConfig


def init_ray(num_cpus: int | None = None) -> dict[str, float]:
    """Attach to the cluster at ``RAY_ADDRESS`` if set, else start a local one; no dashboard.

    Args:
        num_cpus: CPUs a *local* instance offers (default: all logical cores).

    Returns:
        The cluster's resources, e.g. ``{"CPU": 2.0, ...}``.
    """
    import ray

    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            ray.init(address=os.environ["RAY_ADDRESS"])
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
    return ray.cluster_resources()


@dataclass(frozen=True)
class ResourcePlan:
    """CPUs each actor asks Ray for. Fractions are scheduling labels: a 0.5-CPU actor still
    runs in its own process, and Ray starts it only while the requests add up to at most the
    cluster's CPUs, so the plan never leaves an actor pending forever."""

    learner_cpus: float
    worker_cpus: float
    evaluator_cpus: float = 0.0
    parameter_server_cpus: float = 0.0


def plan_resources(num_workers: int, cluster_cpus: float) -> ResourcePlan:
    """One CPU for the learner, the rest shared by the rollout workers (at most 1 each).

    Raises:
        ValueError: if ``num_workers`` is not positive or the cluster is too small for them.
    """
    if not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers={num_workers!r} must be an int >= 1.")
    learner = 1.0 if cluster_cpus >= 2 else cluster_cpus / 2
    per_worker = min(1.0, (cluster_cpus - learner) / num_workers)
    if per_worker < 0.05:
        raise ValueError(
            f"num_workers={num_workers} is too many for a cluster of {cluster_cpus:g} CPUs "
            f"(each worker would get {per_worker:.3f} CPU). Fix: use at most "
            f"{int((cluster_cpus - learner) / 0.05)} workers or a bigger cluster.")
    # Ray counts CPUs in steps of 1e-4: round *down*, so the requests never add up to more
    # than the cluster has (rounding 1/6 up to 0.1667 would overbook 2 CPUs by 0.0002)
    return ResourcePlan(learner_cpus=learner, worker_cpus=math.floor(per_worker * 1e4) / 1e4)


def updates_due(env_steps: int, learning_starts: int, train_every: int) -> int:
    """Gradient updates a run should have done after ``env_steps`` env steps.

    The single-process loop updates at every multiple of ``train_every`` that is past
    ``learning_starts``; this is the number of such multiples up to ``env_steps``, so both
    versions train at the same update-to-data ratio, whatever the two numbers are.
    """
    return max(0, env_steps // train_every - learning_starts // train_every)


@dataclass
class RayResult:
    """What :func:`train_ray` returns (cf. :class:`rlkit.dqn.DQNResult`)."""

    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float
    updates: int
    worker_restarts: int
    weights: Weights
    learner_busy_seconds: float  # time the learner spent inside add_and_train
    startup_seconds: float  # actor start-up before the training clock started
    device: str  # where the learner ran, e.g. "cpu" or "cuda: NVIDIA H100 ..."


def train_dqn_ray(config: DQNConfig, num_workers: int = 2, **options: Any) -> RayResult:
    """Distributed DQN: :func:`train_ray` with :class:`rlkit.algorithms.DQNSpec` and a CPU
    learner (small Q-networks gain nothing from a GPU)."""
    return train_ray(DQNSpec(config), num_workers, learner_gpus=options.pop("learner_gpus", 0),
                     **options)


def train_sac_ray(config: SACConfig, num_workers: int = 2, **options: Any) -> RayResult:
    """Distributed SAC: :func:`train_ray` with :class:`rlkit.algorithms.SACSpec`; the learner
    asks for a GPU when the cluster has one and keeps its buffer and updates there."""
    return train_ray(SACSpec(config), num_workers, **options)


def train_ray(spec: AlgorithmSpec, num_workers: int = 2, fragment_steps: int = 100,
              envs_per_worker: int = 1, publish_every: int = 16, max_learner_lag: int = 2,
              kill_worker_at_step: int | None = None, timeout_s: float = 120.0,
              learner_gpus: float | None = None, progress: bool = False) -> RayResult:
    """Train an off-policy algorithm with rollout workers, a learner that owns the buffer,
    a parameter server and an evaluator.

    The rate limiter: after ``E`` env steps the learner has been asked for exactly
    ``floor((E - learning_starts) / train_every)`` updates, the same ratio as
    :func:`rlkit.dqn.train_dqn`; and at most ``max_learner_lag`` learner calls may be queued,
    so workers cannot run ahead of learning on a machine where acting is faster.

    Args:
        spec: The algorithm spec; ``spec.config`` is the same config as the single-process
            trainer's.
        num_workers: Rollout worker actors.
        fragment_steps: Env steps per worker call (transitions travel in these fragments);
            rounded up to a multiple of ``envs_per_worker``.
        envs_per_worker: Environments each worker steps in lockstep.
        publish_every: Learner updates between weight publications.
        max_learner_lag: Queued learner calls before the driver waits for the learner.
        kill_worker_at_step: Fault injection for demos/tests: ``ray.kill`` worker 0 once this
            many env steps have been collected. The driver restarts it and carries on.
        timeout_s: Longest wait for any actor before raising ``TimeoutError``.
        learner_gpus: GPUs the learner asks for; ``None``: 1 if the cluster has a GPU, else 0.
        progress: Show a tqdm progress bar.

    Needs ``ray.init`` first (see :func:`init_ray`). Every actor it starts is killed before it
    returns, also on error or ``KeyboardInterrupt``. ``wall_seconds`` counts from the moment
    all actors are up (as :func:`rlkit.dqn.train_dqn` counts from the end of its set-up);
    ``startup_seconds`` is the time they took to start.
    """
    import ray
    from ray.exceptions import GetTimeoutError, RayError

    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised. Fix: call rlkit.parallel.init_ray() first.")
    config = spec.config
    cluster = ray.cluster_resources()
    plan = plan_resources(num_workers, cluster.get("CPU", 0.0))
    if learner_gpus is None:
        learner_gpus = 1.0 if cluster.get("GPU", 0) >= 1 else 0.0
    if learner_gpus > cluster.get("GPU", 0):
        raise ValueError(f"learner_gpus={learner_gpus} but the cluster has "
                         f"{cluster.get('GPU', 0):g} GPUs. Fix: use learner_gpus=0 (CPU) or None.")
    make_env(config.env_id, config.seed, spec.action_kind, spec.name).close()  # fail early

    actors: list[Any] = []

    def start(cls: type, cpus: float, *args: Any, gpus: float = 0.0) -> Any:
        handle = ray.remote(cls).options(num_cpus=cpus, num_gpus=gpus).remote(*args)
        actors.append(handle)
        return handle

    history = History()
    startup_seconds, device = 0.0, "cpu"
    restarts = [0] * num_workers
    env_steps = launched_steps = updates_asked = 0
    solved, eval_return = False, math.nan
    bar = None
    start_time = time.perf_counter()
    try:
        ps = start(ParameterServer, plan.parameter_server_cpus)
        # Ray 2.60 hides GPUs only from actors that ask for one, so tell the learner its device
        learner = start(LearnerWorker, plan.learner_cpus, spec, ps, publish_every, True,
                        "cuda" if learner_gpus > 0 else "cpu", gpus=learner_gpus)
        evaluator = start(Evaluator, plan.evaluator_cpus, spec)
        workers = [start(RolloutWorker, plan.worker_cpus, spec, i, ps, 0, envs_per_worker)
                   for i in range(num_workers)]
        # Wait until every actor is constructed (processes started, torch imported) and version 1
        # of the weights is published. The training clock starts after this, as it does in
        # train_dqn after its set-up; the start-up cost is reported as startup_seconds.
        ray.get([learner.publish.remote(), evaluator.ping.remote()]
                + [w.ping.remote() for w in workers], timeout=timeout_s)
        device = ray.get(learner.device_name.remote(), timeout=timeout_s)
        startup_seconds = time.perf_counter() - start_time
        start_time = time.perf_counter()
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=config.total_steps, unit="step",
                       desc=f"{spec.name}, {num_workers} workers")

        # stats ref -> (worker index, batch ref, steps asked for)
        in_flight: dict[Any, tuple[int, Any, int]] = {}

        def launch(i: int) -> None:
            nonlocal launched_steps
            n = min(fragment_steps, config.total_steps - launched_steps)
            if n <= 0:
                return
            n = -(-n // envs_per_worker) * envs_per_worker  # what the worker will really take
            batch_ref, stats_ref = workers[i].collect.options(num_returns=2).remote(
                n, spec.exploration_at(env_steps))
            in_flight[stats_ref] = (i, batch_ref, n)
            launched_steps += n

        def restart_worker(i: int, error: BaseException) -> None:
            ray.kill(workers[i], no_restart=True)
            restarts[i] += 1
            workers[i] = start(RolloutWorker, plan.worker_cpus, spec, i, ps, restarts[i],
                               envs_per_worker)
            history.events.append(f"step {env_steps}: worker {i} failed "
                                  f"({type(error).__name__}); restarted (restart {restarts[i]})")

        learner_calls: deque[Any] = deque()
        eval_ref, eval_at, next_eval = None, 0, config.eval_every

        learner_busy = 0.0

        def learner_result(ref: Any) -> None:
            nonlocal learner_busy
            metrics = ray.get(ref, timeout=timeout_s)
            learner_busy += metrics["seconds"]
            if not math.isnan(metrics["loss"]):
                history.log_loss(env_steps, metrics["loss"])

        for i in range(num_workers):
            launch(i)
        while (in_flight or eval_ref is not None) and not solved:
            waiting = list(in_flight) + ([eval_ref] if eval_ref is not None else [])
            ready, _ = ray.wait(waiting, num_returns=1, timeout=timeout_s)
            if not ready:
                raise TimeoutError(f"no rollout worker or evaluator answered in {timeout_s} s. "
                                   "Fix: check the actors' logs, or raise timeout_s.")
            ref = ready[0]
            if ref is eval_ref:
                returns = ray.get(eval_ref)
                eval_ref, eval_return = None, float(np.mean(returns))
                history.log_eval(eval_at, time.perf_counter() - start_time, eval_return,
                                 float(np.std(returns)))
                solved = config.target_return is not None and eval_return >= config.target_return
                continue
            i, batch_ref, asked = in_flight.pop(ref)
            try:
                stats: FragmentStats = ray.get(ref)
            except RayError as error:  # the worker died or its env raised
                launched_steps -= asked  # those steps were never collected
                restart_worker(i, error)
                launch(i)
                continue
            env_steps += stats.num_steps
            now = time.perf_counter() - start_time
            for r in stats.episode_returns:
                history.log_episode(env_steps, now, r)
            # Rate limiter: ask for exactly the updates these env steps allow.
            due = updates_due(env_steps, config.learning_starts, config.train_every)
            learner_calls.append(learner.add_and_train.remote(batch_ref, due - updates_asked))
            updates_asked = due
            while len(learner_calls) > max_learner_lag:
                learner_result(learner_calls.popleft())
            if kill_worker_at_step is not None and env_steps >= kill_worker_at_step:
                kill_worker_at_step = None
                ray.kill(workers[0], no_restart=True)
            if env_steps >= next_eval and eval_ref is None:
                eval_at, next_eval = env_steps, env_steps + config.eval_every
                eval_ref = evaluator.evaluate.remote(
                    learner.get_weights.remote(), config.eval_episodes,
                    eval_seed(config.seed, len(history.eval_steps), config.eval_episodes))
            if bar is not None:
                bar.update(stats.num_steps)
                bar.set_postfix(ret=f"{history.recent_return():.0f}", eval=f"{eval_return:.0f}")
            launch(i)
        while learner_calls:
            learner_result(learner_calls.popleft())
        weights = ray.get(learner.get_weights.remote(), timeout=timeout_s)
        if not solved and (not history.eval_steps or history.eval_steps[-1] != env_steps):
            returns = ray.get(evaluator.evaluate.remote(
                weights, config.eval_episodes,
                eval_seed(config.seed, len(history.eval_steps), config.eval_episodes)),
                timeout=timeout_s)
            eval_return = float(np.mean(returns))
            history.log_eval(env_steps, time.perf_counter() - start_time, eval_return,
                             float(np.std(returns)))
            solved = config.target_return is not None and eval_return >= config.target_return
        updates = ray.get(learner.num_updates.remote(), timeout=timeout_s)
    except GetTimeoutError as error:
        raise TimeoutError(f"an actor did not answer within timeout_s={timeout_s} s: {error}. "
                           "Fix: check the actors' logs, or raise timeout_s.") from error
    finally:
        if bar is not None:
            bar.close()
        for handle in actors:
            ray.kill(handle, no_restart=True)
    return RayResult(history, solved, eval_return, env_steps, time.perf_counter() - start_time,
                     updates, sum(restarts), weights, learner_busy, startup_seconds, device)
