"""The actor-learner queue driver: IMPALA under Ray, and the rollout ceiling it is measured
against.

The driver starts a :class:`~rlkit.distributed.impala_roles.TrajectoryQueue`, an
:class:`~rlkit.distributed.impala_roles.ImpalaLearner` and ``num_actors``
:class:`~rlkit.distributed.impala_roles.ImpalaActor` s through a :class:`Supervisor`. The actors
run on their own (``run()`` returns only when the queue closes); the driver keeps two learner
calls in flight, logs what they report, evaluates the greedy policy every ``eval_every`` env
steps, restarts an actor that dies, and closes the queue when the run is solved or out of
budget. Asynchronous runs are not bit-reproducible.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rlkit.algos.a2c import ActorCritic, sampling_policy
from rlkit.algos.impala import IMPALAConfig
from rlkit.common import next_multiple
from rlkit.distributed.cluster import plan_resources, require_ray
from rlkit.distributed.impala_roles import ImpalaActor, ImpalaLearner, TrajectoryQueue
from rlkit.distributed.supervisor import STARTUP_TIMEOUT_S, Supervisor
from rlkit.envs import make_env, space_dims
from rlkit.metrics import History
from rlkit.progress import ProgressBar
from rlkit.train.impala import IMPALAResult, actor_seed, greedy_eval
from rlkit.rollout import EnvRunner
from rlkit.types import Weights

UPDATES_PER_CALL = 4  # learner updates per remote call; two calls are kept in flight


def start_roles(sup: Supervisor, config: IMPALAConfig, obs_dim: int, n_actions: int) -> None:
    """Start the queue, the learner and the actors as roles ``"trajectory queue"``,
    ``"learner"``, ``"actor i"``, sized to the cluster (fractions of a CPU on 2 cores)."""
    import ray

    plan = plan_resources(config.num_actors, require_ray()["CPU"])
    queue = sup.start("trajectory queue", lambda restart: ray.remote(TrajectoryQueue).options(
        num_cpus=0, max_concurrency=2 * config.num_actors + 4).remote(config.queue_size))
    sup.start("learner", lambda restart: ray.remote(ImpalaLearner).options(
        num_cpus=plan.learner_cpus).remote(config, obs_dim, n_actions, queue))
    for i in range(config.num_actors):
        sup.start(f"actor {i}", lambda restart, i=i: ray.remote(ImpalaActor).options(
            num_cpus=plan.worker_cpus).remote(config, i, queue, restart))
    sup.wait_started(list(sup.handles), max(STARTUP_TIMEOUT_S, config.timeout_s))


def train_impala_ray(config: IMPALAConfig, progress: bool = False,
                     kill_actor_at: int | None = None, max_restarts: int = 3) -> IMPALAResult:
    """Train IMPALA with ``config.num_actors`` actors, a bounded queue and a learner actor.

    Stops at the first greedy evaluation reaching ``config.target_return`` or once the learner
    has consumed ``config.total_steps`` env steps. Call :func:`init_ray` first.

    Args:
        config: The run's settings.
        progress: Show a progress bar.
        kill_actor_at: Kill actor 0 once this many env steps were consumed (a fault demo);
            the driver replaces it.
        max_restarts: Restarts allowed per actor.
    """
    import ray

    probe = make_env(config.env_id, config.seed, "discrete", "IMPALA")
    obs_dim, n_actions = space_dims(probe)
    probe.close()
    history = History()
    setup = time.perf_counter()
    with Supervisor(config.timeout_s * 2, max_restarts, history) as sup:
        start_roles(sup, config, obs_dim, n_actions)
        if kill_actor_at is not None:
            sup.kill_at["actor 0"] = kill_actor_at
        startup = time.perf_counter() - setup
        runs = {sup[f"actor {i}"].run.remote(): i for i in range(config.num_actors)}
        state: dict[str, Any] = {"env_steps": 0, "lags": [], "eval_return": float("nan"),
                                 "solved": False, "updates": 0, "busy": 0.0, "learner_wait": 0.0,
                                 "eval_seconds": 0.0, "weights": {}}
        bar = ProgressBar(progress, config.total_steps, 0, "IMPALA (Ray)")
        train = [sup["learner"].train.remote(UPDATES_PER_CALL) for _ in range(2)]
        start = time.perf_counter()
        while not state["solved"] and state["env_steps"] < config.total_steps:
            ref = sup.wait_one([*train, *runs], lambda: ("learner or actor", "training"))
            if ref in runs:  # an actor's run() ended: only a failure ends it before we stop
                i = runs.pop(ref)
                try:
                    sup.get(ref, f"actor {i}", "collecting trajectories")
                except Exception as error:  # noqa: BLE001  (any failure: replace the actor)
                    sup.restart(f"actor {i}", error, state["env_steps"])
                runs[sup[f"actor {i}"].run.remote()] = i
                continue
            train.remove(ref)
            report = sup.get(ref, "learner", "training")
            record(state, report, history, start)
            state["weights"] = report["weights"]  # the policy the recorded env steps trained
            train.append(sup["learner"].train.remote(UPDATES_PER_CALL))
            maybe_evaluate(state, report["weights"], config, obs_dim, n_actions, history, start)
            sup.inject_faults(state["env_steps"])
            bar.update(state["env_steps"], eval=f"{state['eval_return']:.0f}")
        wall = time.perf_counter() - start
        bar.close(state["solved"])
        queue_stats = sup.get(sup["trajectory queue"].stats.remote(), "trajectory queue",
                              "reading its statistics")
        sup.get(sup["trajectory queue"].close.remote(), "trajectory queue", "closing")
        # closed: actors return at their next put, the learner at its next batch; give them a
        # moment to finish cleanly before the supervisor kills everything
        ray.wait([*train, *runs], num_returns=len(train) + len(runs), timeout=5.0)
    return IMPALAResult(history, state["solved"], state["eval_return"], state["env_steps"], wall,
                        state["updates"], state["lags"], state["weights"], startup,
                        sup.restart_count("actor"), int(queue_stats["high_water"]),
                        float(queue_stats["wait_seconds"]),
                        {"learner_busy_seconds": state["busy"],
                         "learner_wait_seconds": state["learner_wait"],
                         "eval_seconds": state["eval_seconds"]})


def record(state: dict[str, Any], stats: dict[str, Any], history: History, start: float) -> None:
    """Add one learner report to the run's state and history."""
    state["env_steps"] += stats["env_steps"]
    state["lags"] += stats["lags"]
    state["updates"] = stats["updates"]
    state["busy"] += stats["busy_seconds"]
    state["learner_wait"] += stats["wait_seconds"]
    now = time.perf_counter() - start
    for ret in stats["episode_returns"]:
        history.log_episode(state["env_steps"], now, ret)
    history.log_loss(state["env_steps"], stats["loss"])


def maybe_evaluate(state: dict[str, Any], weights: Weights, config: IMPALAConfig,
                   obs_dim: int, n_actions: int, history: History, start: float) -> None:
    """A greedy evaluation, here in the driver, of the weights that the env steps consumed so
    far trained, once per ``eval_every`` consumed env steps and at the end of the budget; its
    seconds are added up in ``state["eval_seconds"]``."""
    evals = len(history.eval_steps)
    last = history.eval_steps[-1] if evals else 0
    if not (state["env_steps"] >= next_multiple(last, config.eval_every)
            or state["env_steps"] >= config.total_steps):
        return
    begin = time.perf_counter()
    mean, std = greedy_eval(weights, obs_dim, n_actions, config, evals)
    state["eval_seconds"] += time.perf_counter() - begin
    history.log_eval(state["env_steps"], time.perf_counter() - start, mean, std)
    state["eval_return"] = mean
    state["solved"] = config.target_return is not None and mean >= config.target_return


def rollout_ceiling(config: IMPALAConfig, seconds: float = 3.0) -> float:
    """Env steps per second of one actor's loop (``envs_per_actor`` envs, the same policy
    network sampling actions) in this process, no Ray, no learning: the rate one core can
    produce, which the learner's consumption is compared with."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runner = EnvRunner(config.env_id, actor_seed(config, 0), "discrete", "IMPALA",
                           config.envs_per_actor)
        net = ActorCritic(runner.obs_dim, runner.action_dim, config.hidden)
        policy = sampling_policy(net, np.random.default_rng(config.seed))
        runner.run(config.unroll_length, policy, fixed_length=True)  # warm-up
        steps, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds:
            steps += runner.run(config.unroll_length, policy, fixed_length=True).num_steps
        runner.close()
        return steps / (time.perf_counter() - begin)
    finally:
        torch.set_num_threads(threads)
