"""IMPALA in one process, with a *simulated* policy lag: reproducible, and the reference the Ray
version (:func:`rlkit.distributed.impala.train_impala_ray`) is checked against.

Each update collects ``batch_fragments`` trajectories, round-robin from ``num_actors`` runners
(seeded as the Ray actors are), acting with the weights of ``policy_lag`` updates ago, then
takes one V-trace step. ``policy_lag=0`` is synchronous, on-policy training.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlkit.algos.a2c import ActorCritic, greedy_policy, sampling_policy
from rlkit.algos.impala import IMPALAConfig, VTraceLearner
from rlkit.common import eval_seed
from rlkit.evaluation import evaluate_policy
from rlkit.metrics import History
from rlkit.networks import load_numpy_weights
from rlkit.progress import ProgressBar
from rlkit.rollout import EnvRunner
from rlkit.types import Weights


@dataclass
class IMPALAResult:
    """What an IMPALA run returns (single process or Ray).

    Attributes:
        history: Training episodes and greedy evaluations against env steps and seconds.
        solved: Whether an evaluation reached ``target_return``.
        eval_return: Mean return of the last greedy evaluation.
        env_steps: Env steps in the trajectories the learner consumed.
        wall_seconds: Training wall-clock time (after set-up), evaluations included.
        updates: Learner updates (the final policy version).
        policy_lags: Per consumed fragment, the learner's version minus the actor's.
        weights: The final network weights.
        startup_seconds: Time to start the actors (Ray only).
        worker_restarts: Actors replaced after a failure (Ray only).
        queue_high_water: Most fragments the queue ever held (Ray only).
        actor_wait_seconds: Seconds the actors spent blocked on a full queue (Ray only).
    """

    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float
    updates: int
    policy_lags: list[int]
    weights: Weights
    startup_seconds: float = 0.0
    worker_restarts: int = 0
    queue_high_water: int = 0
    actor_wait_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def env_steps_per_second(self) -> float:
        """Env steps the learner consumed per wall-clock second of training."""
        return self.env_steps / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def consumption_steps_per_second(self) -> float:
        """Env steps consumed per second of training with the driver's evaluation seconds
        (``extra["eval_seconds"]``, Ray runs) taken out: the learner's throughput. Exact for a
        run whose only evaluation is the final one, at the end of the budget (nothing consumed
        while it runs is counted); mid-run evaluations overlap training, so there it reads
        high."""
        seconds = self.wall_seconds - float(self.extra.get("eval_seconds", 0.0))
        return self.env_steps / seconds if seconds > 0 else 0.0


def actor_seed(config: IMPALAConfig, index: int, restart: int = 0) -> int:
    """Seed of actor ``index`` (a restarted actor gets a fresh stream)."""
    return config.seed + 1000 * (index + 1) + 100_000 * restart


def greedy_eval(weights: Weights, obs_dim: int, n_actions: int, config: IMPALAConfig,
                eval_index: int) -> tuple[float, float]:
    """Mean and std of ``config.eval_episodes`` greedy episodes with ``weights``."""
    net = ActorCritic(obs_dim, n_actions, config.hidden)
    load_numpy_weights(net, weights)
    returns = evaluate_policy(greedy_policy(net), config.env_id, config.eval_episodes,
                              eval_seed(config.seed, eval_index, config.eval_episodes))
    return float(returns.mean()), float(returns.std())


def train_impala(config: IMPALAConfig, policy_lag: int = 0, progress: bool = False
                 ) -> IMPALAResult:
    """Train IMPALA in this process; bit-reproducible for a given config and ``policy_lag``.

    Args:
        config: The run's settings (``num_actors`` runners, each ``envs_per_actor`` envs).
        policy_lag: Act with the weights of this many updates ago (0: on-policy).
        progress: Show a progress bar.
    """
    torch.set_num_threads(1)
    runners = [EnvRunner(config.env_id, actor_seed(config, i), "discrete", "IMPALA",
                         config.envs_per_actor) for i in range(config.num_actors)]
    obs_dim, n_actions = runners[0].obs_dim, runners[0].action_dim
    learner = VTraceLearner(obs_dim, n_actions, config)
    acting = ActorCritic(obs_dim, n_actions, config.hidden)
    policy = sampling_policy(acting, np.random.default_rng(config.seed))
    past = collections.deque([learner.get_weights()], maxlen=policy_lag + 1)
    history, lags = History(), []
    env_steps, evals, eval_return, solved = 0, 0, float("nan"), False
    bar = ProgressBar(progress, config.total_steps, 0, "IMPALA (1 process)")
    start = time.perf_counter()
    while env_steps < config.total_steps and not solved:
        load_numpy_weights(acting, past[0])  # the oldest kept: policy_lag updates ago
        version = max(0, learner.updates - policy_lag)
        batch = []
        for k in range(config.batch_fragments):
            runner = runners[(learner.updates * config.batch_fragments + k) % len(runners)]
            traj = runner.run(config.unroll_length, policy, fixed_length=True)
            traj.policy_version = version
            batch.append(traj)
            env_steps += traj.num_steps
            for ret in traj.episode_returns:
                history.log_episode(env_steps, time.perf_counter() - start, ret)
        lags += [learner.updates - version] * len(batch)
        metrics = learner.update(batch)
        history.log_loss(env_steps, metrics["loss"])
        past.append(learner.get_weights())
        if env_steps >= (evals + 1) * config.eval_every or env_steps >= config.total_steps:
            mean, std = greedy_eval(learner.get_weights(), obs_dim, n_actions, config, evals)
            history.log_eval(env_steps, time.perf_counter() - start, mean, std)
            evals, eval_return = evals + 1, mean
            solved = config.target_return is not None and mean >= config.target_return
        bar.update(env_steps, eval=f"{eval_return:.0f}")
    wall = time.perf_counter() - start
    bar.close(solved)
    for runner in runners:
        runner.close()
    return IMPALAResult(history, solved, eval_return, env_steps, wall, learner.updates, lags,
                        learner.get_weights())
