"""Drivers that wire the Ray actors of :mod:`rlkit.actors` into a training run."""

from __future__ import annotations

import math
import os
import time
import warnings
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlkit.actors import Evaluator, FragmentStats, LearnerWorker, RolloutWorker, Weights
from rlkit.algorithms import AlgorithmSpec, DQNSpec, SACSpec
from rlkit.checkpoint import (check_checkpoint_options, load_checkpoint, next_multiple,
                              save_checkpoint)
from rlkit.dqn import DQNConfig, eval_seed
from rlkit.buffers import check_buffer_memory
from rlkit.envs import make_env, space_dims
from rlkit.metrics import History
from rlkit.parameter_server import ParameterServer
from rlkit.sac import SACConfig
from rlkit.update_schedule import resumed_updates_due, updates_due

__all__ = ["LearnerFailedError", "RayResult", "ResourcePlan", "init_ray", "plan_resources",
           "train_dqn_ray", "train_ray", "train_sac_ray", "updates_due"]


def init_ray(num_cpus: int | None = None) -> dict[str, float]:
    """Attach to the cluster at ``RAY_ADDRESS`` if set, else start a local one; no dashboard.

    A local instance keeps Ray 2.60's token authentication on (``ray.init`` turns it on unless
    ``RAY_AUTH_MODE`` says otherwise): its ports listen on the machine's network address, not
    only on localhost, so the token is what keeps other machines out. The token file
    (``~/.ray/auth_token``) is made readable by its owner only. Setting
    ``RAY_AUTH_MODE=disabled`` gets a warning.

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
            mode = os.environ.get("RAY_AUTH_MODE", "")
            if mode and mode.lower() != "token":
                warnings.warn(f"RAY_AUTH_MODE={mode!r} turns Ray's token authentication off: "
                              "anyone who can reach this machine's Ray ports can run code "
                              "here. Fix: unset RAY_AUTH_MODE.", stacklevel=2)
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=True)
            protect_token_file()
    return ray.cluster_resources()


def protect_token_file() -> Path | None:
    """Make Ray's token file readable by its owner only (Ray 2.60 writes it world-readable);
    returns its path, or ``None`` if there is none or it is not ours."""
    token = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    try:
        if token.is_file() and token.stat().st_uid == os.getuid():
            token.chmod(0o600)
            return token
    except OSError:
        pass
    return None


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
        raise ValueError(f"num_workers={num_workers!r} must be an int >= 1. Fix: use "
                         f"num_workers=1 or more.")
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
    evaluator_restarts: int = 0
    checkpoint: Path | None = None  # the last checkpoint written


def train_dqn_ray(config: DQNConfig, num_workers: int = 2, **options: Any) -> RayResult:
    """Distributed DQN: :func:`train_ray` with :class:`rlkit.algorithms.DQNSpec` and a CPU
    learner (small Q-networks gain nothing from a GPU)."""
    return train_ray(DQNSpec(config), num_workers, learner_gpus=options.pop("learner_gpus", 0),
                     **options)


def train_sac_ray(config: SACConfig, num_workers: int = 2, **options: Any) -> RayResult:
    """Distributed SAC: :func:`train_ray` with :class:`rlkit.algorithms.SACSpec`; the learner
    asks for a GPU when the cluster has one and keeps its buffer and updates there."""
    return train_ray(SACSpec(config), num_workers, **options)


#: The least time the driver waits for its actors to start (processes, torch imports).
STARTUP_TIMEOUT_S = 120.0


class LearnerFailedError(RuntimeError):
    """The learner actor died or stopped; the message names the last checkpoint to resume."""


def describe_error(error: BaseException) -> str:
    """``"Type: message"`` of the original exception behind a Ray error, on one line."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[-1][:200] if lines else ''}"


def _check_driver_options(options: dict[str, Any]) -> None:
    """Validate :func:`train_ray`'s arguments; each error names the argument and the fix."""
    for name in ("fragment_steps", "envs_per_worker", "publish_every", "max_learner_lag",
                 "max_restarts"):
        value = options[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} must be an int >= 1. Fix: leave it at its "
                             f"default unless you are measuring something.")
    timeout = options["timeout_s"]
    if not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout_s={timeout!r} must be a positive number of seconds. Fix: "
                         f"use e.g. 120.0; a hang then surfaces as an error after that long.")
    for name in ("kill_worker_at_step", "kill_learner_at_step", "kill_evaluator_at_step"):
        value = options[name]
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError(f"{name}={value!r} must be None or an env-step count >= 0.")
    gpus = options["learner_gpus"]
    if gpus is not None and (not isinstance(gpus, int | float) or gpus < 0):
        raise ValueError(f"learner_gpus={gpus!r} must be None (use a GPU if the cluster has "
                         f"one) or a number >= 0.")
    check_checkpoint_options(options["checkpoint_dir"], options["checkpoint_every"],
                             options["resume_from"])


def train_ray(spec: AlgorithmSpec, num_workers: int = 2, fragment_steps: int = 100,
              envs_per_worker: int = 1, publish_every: int = 16, max_learner_lag: int = 2,
              timeout_s: float = 120.0, learner_gpus: float | None = None,
              progress: bool = False, checkpoint_dir: str | Path | None = None,
              checkpoint_every: int = 5_000, checkpoint_buffer: bool = True,
              resume_from: str | Path | None = None, max_restarts: int = 10,
              kill_worker_at_step: int | None = None, kill_learner_at_step: int | None = None,
              kill_evaluator_at_step: int | None = None) -> RayResult:
    """Train an off-policy algorithm with rollout workers, a learner that owns the buffer,
    a parameter server and an evaluator.

    The rate limiter: after ``E`` env steps the learner has been asked for exactly
    ``floor((E - learning_starts) / train_every)`` updates, the same ratio as
    :func:`rlkit.dqn.train_dqn`; and at most ``max_learner_lag`` learner calls may be queued,
    so workers cannot run ahead of learning on a machine where acting is faster.

    Faults: a rollout worker that dies or whose environment raises is restarted with a fresh
    seed, and the evaluator likewise (each at most ``max_restarts`` times); every restart is
    recorded in ``history.events`` with the worker and the error. If the *learner* fails, the
    run stops with :class:`LearnerFailedError` naming the last checkpoint (resume from it with
    ``resume_from``); a non-finite loss stops it with ``FloatingPointError`` carrying the last
    metrics. An actor that does not answer within ``timeout_s`` raises ``TimeoutError`` naming
    its role.

    Args:
        spec: The algorithm spec; ``spec.config`` is the same config as the single-process
            trainer's.
        num_workers: Rollout worker actors.
        fragment_steps: Env steps per worker call (transitions travel in these fragments);
            rounded up to a multiple of ``envs_per_worker``.
        envs_per_worker: Environments each worker steps in lockstep.
        publish_every: Learner updates between weight publications.
        max_learner_lag: Queued learner calls before the driver waits for the learner.
        timeout_s: Longest wait for any actor before raising ``TimeoutError`` (the actors'
            start-up may take up to ``max(timeout_s, STARTUP_TIMEOUT_S)``).
        learner_gpus: GPUs the learner asks for; ``None``: 1 if the cluster has a GPU, else 0.
        progress: Show a tqdm progress bar.
        checkpoint_dir, checkpoint_every, checkpoint_buffer, resume_from: As in
            :func:`rlkit.training.train_single_process` (the same checkpoint format, so either
            driver can resume the other's run).
        max_restarts: Restarts allowed per rollout worker and for the evaluator before the run
            gives up (an environment that always crashes would otherwise restart forever).
        kill_worker_at_step, kill_learner_at_step, kill_evaluator_at_step: Fault injection for
            demos and tests: ``ray.kill`` worker 0 / the learner / the evaluator once this many
            env steps have been collected.

    Needs ``ray.init`` first (see :func:`init_ray`). Every actor it starts is killed before it
    returns, also on error or ``KeyboardInterrupt`` (after which a checkpoint is saved if
    ``checkpoint_dir`` is set and the learner still answers). ``wall_seconds`` counts from the
    moment all actors are up (as :func:`rlkit.dqn.train_dqn` counts from the end of its set-up);
    ``startup_seconds`` is the time they took to start.
    """
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayError

    _check_driver_options(dict(
        fragment_steps=fragment_steps, envs_per_worker=envs_per_worker,
        publish_every=publish_every, max_learner_lag=max_learner_lag, max_restarts=max_restarts,
        timeout_s=timeout_s, kill_worker_at_step=kill_worker_at_step,
        kill_learner_at_step=kill_learner_at_step, kill_evaluator_at_step=kill_evaluator_at_step,
        learner_gpus=learner_gpus, checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every, resume_from=resume_from))
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
    env = make_env(config.env_id, config.seed, spec.action_kind, spec.name)  # fail early
    obs_dim, act_dim = space_dims(env)
    env.close()
    # estimate the learner's buffer before any actor starts (for a GPU learner the driver
    # cannot see the GPU's free memory; the learner checks again when it allocates)
    check_buffer_memory(config.buffer_size, obs_dim,
                        None if spec.action_kind == "discrete" else act_dim)
    resumed = None if resume_from is None else load_checkpoint(resume_from, spec.name, config)

    actors: list[Any] = []

    def start(cls: type, cpus: float, *args: Any, gpus: float = 0.0) -> Any:
        handle = ray.remote(cls).options(num_cpus=cpus, num_gpus=gpus).remote(*args)
        actors.append(handle)
        return handle

    history, env_steps, updates_asked, clock_offset = History(), 0, 0, 0.0
    if resumed is not None:
        history, env_steps = resumed.history, resumed.env_steps
        updates_asked, clock_offset = resumed.updates, resumed.wall_seconds
        history.events.append(f"step {env_steps}: resumed from {resumed.path}")
    # seeds differ between a run and each of its resumptions (see RolloutWorker's seeding)
    generation = 1000 * sum("resumed from" in e for e in history.events)
    launched_steps = env_steps
    startup_seconds, device = 0.0, "cpu"
    restarts = [0] * num_workers
    evaluator_restarts = 0
    solved, eval_return = False, math.nan
    last_checkpoint: Path | None = None
    checkpointed_at = updates_asked
    bar = None
    saver: Any = None  # save() once the actors are up: an interrupt before that saves nothing
    start_time = time.perf_counter()

    def clock() -> float:
        return clock_offset + time.perf_counter() - start_time

    try:
        ps = start(ParameterServer, plan.parameter_server_cpus)
        # Ray 2.60 hides GPUs only from actors that ask for one, so tell the learner its device
        learner = start(LearnerWorker, plan.learner_cpus, spec, ps, publish_every, True,
                        "cuda" if learner_gpus > 0 else "cpu", timeout_s, gpus=learner_gpus)
        evaluator = start(Evaluator, plan.evaluator_cpus, spec)
        workers = [start(RolloutWorker, plan.worker_cpus, spec, i, ps, generation,
                         envs_per_worker, timeout_s) for i in range(num_workers)]

        def learner_failed(error: BaseException, doing: str) -> LearnerFailedError:
            where = (f"the last checkpoint is {last_checkpoint}. Fix: find the cause above, "
                     f"then call again with resume_from={str(last_checkpoint)!r}"
                     if last_checkpoint is not None else
                     "no checkpoint was written (pass checkpoint_dir=... to keep one)")
            return LearnerFailedError(f"the learner actor failed while {doing} at env step "
                                      f"{env_steps} ({describe_error(error)}); {where}.")

        def get_from_learner(ref: Any, doing: str, timeout: float | None = None) -> Any:
            try:
                return ray.get(ref, timeout=timeout or timeout_s)
            except GetTimeoutError as error:
                raise TimeoutError(f"the learner did not answer within timeout_s={timeout_s} s "
                                   f"while {doing}. Fix: check its log, or raise timeout_s "
                                   f"if its updates are that slow.") from error
            except RayActorError as error:
                raise learner_failed(error, doing) from error
            except RayError as error:
                cause = getattr(error, "cause", None)
                if isinstance(cause, FloatingPointError):
                    raise FloatingPointError(
                        f"the learner stopped at env step {env_steps}: {cause} (last "
                        f"checkpoint: {last_checkpoint})") from error
                raise learner_failed(error, doing) from error

        # Wait until every actor is constructed (processes started, torch imported) and version 1
        # of the weights is published. The training clock starts after this, as it does in
        # train_dqn after its set-up; the start-up cost is reported as startup_seconds.
        # Starting processes takes seconds on a busy machine: allow at least STARTUP_TIMEOUT_S.
        startup_timeout = max(timeout_s, STARTUP_TIMEOUT_S)
        if resumed is not None:
            get_from_learner(learner.restore.remote(resumed.learner, resumed.buffer),
                             "loading the checkpoint", startup_timeout)
        get_from_learner(learner.publish.remote(), "starting", startup_timeout)
        try:
            ray.get([evaluator.ping.remote()] + [w.ping.remote() for w in workers],
                    timeout=startup_timeout)
        except GetTimeoutError as error:
            raise TimeoutError(f"the rollout workers and evaluator did not start within "
                               f"{startup_timeout} s. Fix: check that the cluster has room "
                               f"for them (ray status) and the actors' logs.") from error
        device = get_from_learner(learner.device_name.remote(), "starting", startup_timeout)
        startup_seconds = time.perf_counter() - start_time
        start_time = time.perf_counter()
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=config.total_steps, initial=env_steps, unit="step",
                       desc=f"{spec.name}, {num_workers} workers")

        def save() -> None:
            nonlocal last_checkpoint, checkpointed_at
            if checkpoint_dir is None:
                return
            state = get_from_learner(learner.state.remote(checkpoint_buffer),
                                     "saving a checkpoint")
            last_checkpoint = save_checkpoint(checkpoint_dir, spec.name, config,
                                              state["learner"], state["buffer"], env_steps,
                                              clock(), history)
            checkpointed_at = updates_asked

        saver = save
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
            if restarts[i] > max_restarts:
                raise RuntimeError(f"rollout worker {i} failed {restarts[i]} times; the last "
                                   f"error: {describe_error(error)}. Fix: the environment "
                                   f"keeps failing: run it alone (rlkit.envs.make_env) to "
                                   f"debug it, or raise max_restarts.") from error
            workers[i] = start(RolloutWorker, plan.worker_cpus, spec, i, ps,
                               generation + restarts[i], envs_per_worker, timeout_s)
            history.events.append(f"step {env_steps}: worker {i} failed "
                                  f"({describe_error(error)}); restarted (restart {restarts[i]})")

        def evaluate(weights_ref: Any) -> Any:
            return evaluator.evaluate.remote(
                weights_ref, config.eval_episodes,
                eval_seed(config.seed, len(history.eval_steps), config.eval_episodes))

        def restart_evaluator(error: BaseException) -> None:
            nonlocal evaluator, evaluator_restarts
            ray.kill(evaluator, no_restart=True)
            evaluator_restarts += 1
            if evaluator_restarts > max_restarts:
                raise RuntimeError(f"the evaluator failed {evaluator_restarts} times; the last "
                                   f"error: {describe_error(error)}. Fix: run the evaluation "
                                   f"alone (rlkit.evaluation.evaluate_policy) to debug it.")
            evaluator = start(Evaluator, plan.evaluator_cpus, spec)
            history.events.append(f"step {env_steps}: evaluator failed "
                                  f"({describe_error(error)}); restarted "
                                  f"(restart {evaluator_restarts})")

        def learner_alive() -> bool:
            try:
                ray.get(learner.num_updates.remote(), timeout=timeout_s)
                return True
            except RayError:
                return False

        learner_calls: deque[Any] = deque()
        eval_ref, eval_at = None, 0
        next_eval = next_multiple(env_steps, config.eval_every)
        learner_busy = 0.0

        def learner_result(ref: Any) -> None:
            nonlocal learner_busy
            metrics = get_from_learner(ref, "training")
            learner_busy += metrics["seconds"]
            if not math.isnan(metrics["loss"]):
                history.log_loss(env_steps, metrics["loss"])

        for i in range(num_workers):
            launch(i)
        while (in_flight or eval_ref is not None) and not solved:
            waiting = list(in_flight) + ([eval_ref] if eval_ref is not None else [])
            ready, _ = ray.wait(waiting, num_returns=1, timeout=timeout_s)
            if not ready:
                raise TimeoutError(
                    f"no rollout worker {'or the evaluator ' if eval_ref is not None else ''}"
                    f"answered within timeout_s={timeout_s} s (waiting for workers "
                    f"{sorted({in_flight[r][0] for r in in_flight})}). Fix: check the actors' "
                    f"logs (an environment may hang), or raise timeout_s.")
            ref = ready[0]
            if ref is eval_ref:
                try:
                    returns = ray.get(eval_ref)
                except RayError as error:
                    if not learner_alive():
                        raise learner_failed(error, "sending weights to the evaluator") \
                            from error
                    restart_evaluator(error)
                    eval_ref = evaluate(learner.get_weights.remote())
                    continue
                eval_ref, eval_return = None, float(np.mean(returns))
                history.log_eval(eval_at, clock(), eval_return, float(np.std(returns)))
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
            now = clock()
            for r in stats.episode_returns:
                history.log_episode(env_steps, now, r)
            # Rate limiter: ask for exactly the updates these env steps allow.
            due = resumed_updates_due(env_steps, resumed, config.learning_starts,
                                      config.train_every)
            learner_calls.append(learner.add_and_train.remote(batch_ref, due - updates_asked))
            updates_asked = due
            while len(learner_calls) > max_learner_lag:
                learner_result(learner_calls.popleft())
            if checkpoint_dir is not None and updates_asked - checkpointed_at >= checkpoint_every:
                save()
            if kill_worker_at_step is not None and env_steps >= kill_worker_at_step:
                kill_worker_at_step = None
                ray.kill(workers[0], no_restart=True)
            if kill_learner_at_step is not None and env_steps >= kill_learner_at_step:
                kill_learner_at_step = None
                ray.kill(learner, no_restart=True)
            if kill_evaluator_at_step is not None and env_steps >= kill_evaluator_at_step:
                kill_evaluator_at_step = None
                ray.kill(evaluator, no_restart=True)
            if env_steps >= next_eval and eval_ref is None:
                eval_at, next_eval = env_steps, next_multiple(env_steps, config.eval_every)
                eval_ref = evaluate(learner.get_weights.remote())
            if bar is not None:
                bar.update(stats.num_steps)
                bar.set_postfix(ret=f"{history.recent_return():.0f}", eval=f"{eval_return:.0f}")
            launch(i)
        while learner_calls:
            learner_result(learner_calls.popleft())
        weights = get_from_learner(learner.get_weights.remote(), "sending its final weights")
        if not solved and (not history.eval_steps or history.eval_steps[-1] != env_steps):
            for attempt in range(2):  # one retry with a restarted evaluator
                try:
                    returns = ray.get(evaluate(weights), timeout=timeout_s)
                    break
                except GetTimeoutError:
                    raise
                except RayError as error:
                    if attempt == 1:
                        raise
                    restart_evaluator(error)
            eval_return = float(np.mean(returns))
            history.log_eval(env_steps, clock(), eval_return, float(np.std(returns)))
            solved = config.target_return is not None and eval_return >= config.target_return
        updates = get_from_learner(learner.num_updates.remote(), "finishing")
        save()
    except GetTimeoutError as error:
        raise TimeoutError(f"an actor did not answer within timeout_s={timeout_s} s: {error}. "
                           "Fix: check the actors' logs, or raise timeout_s.") from error
    except KeyboardInterrupt:
        # the learner pressed stop: keep what was learned if the learner still answers quickly
        if saver is not None:
            try:
                timeout_s = min(timeout_s, 10.0)
                saver()
                print(f"interrupted at env step {env_steps}; checkpoint saved to "
                      f"{last_checkpoint}")
            except Exception as error:  # noqa: BLE001 - the interrupt is what matters
                print(f"interrupted; no checkpoint saved ({describe_error(error)})")
        raise
    finally:
        if bar is not None:
            bar.close()
        for handle in actors:
            ray.kill(handle, no_restart=True)
    return RayResult(history, solved, eval_return, env_steps, clock(), updates, sum(restarts),
                     weights, learner_busy, startup_seconds, device, evaluator_restarts,
                     last_checkpoint)
