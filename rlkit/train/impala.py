"""IMPALA in one process, with a *simulated* policy lag: reproducible, and the reference the Ray
version (:func:`rlkit.distributed.impala.driver.train_impala_ray`) is checked against.

Each update collects ``batch_fragments`` trajectories, round-robin from ``num_workers`` runners
(seeded as the Ray actors are), acting with the weights of ``policy_lag`` updates ago, then
takes one V-trace step. ``policy_lag=0`` is synchronous, on-policy training. Given a
:class:`~rlkit.algos.ppo.PPOConfig` the same loop trains PPO (``policy_lag=0``,
:func:`rlkit.train.ppo.train_ppo`) or APPO with a simulated lag.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from rlkit.algos.a2c import greedy_eval
from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.policy_heads import acting_policy, make_actor_critic
from rlkit.algos.ppo import algorithm_name, config_action_kind, make_learner
from rlkit.core.common import worker_seed
from rlkit.core.metrics import History, RunResult
from rlkit.core.networks import load_numpy_weights
from rlkit.core.validation import FLAG, check_value, int_rule, require_instance
from rlkit.envs.runner import EnvRunner
from rlkit.notebook.progress import ProgressBar
from rlkit.train.options import refuse_other_options


@dataclass(kw_only=True)
class IMPALAResult(RunResult):
    """What an IMPALA run returns (single process or Ray): :class:`RunResult` plus IMPALA's own
    measures. ``env_steps`` counts the env steps of the fragments the learner consumed.

    Attributes:
        policy_lags: Per consumed fragment, the learner's version minus the acting version.
        queue_high_water: Most fragments the queue ever held (Ray only).
        actor_wait_seconds: Seconds the actors spent blocked on a full queue (Ray only).
        learner_busy_seconds: Seconds the learner spent updating and publishing (Ray only).
        learner_wait_seconds: Seconds the learner spent waiting for batches (Ray only).
        eval_seconds: Seconds the driver spent in greedy evaluations (Ray only).
        diagnostics: Per update, each metric the learner returned besides the loss (one
            process only; PPO's ``approx_kl`` and ``clip_fraction`` among them).
    """

    policy_lags: list[int] = field(default_factory=list)
    queue_high_water: int = 0
    actor_wait_seconds: float = 0.0
    learner_busy_seconds: float = 0.0
    learner_wait_seconds: float = 0.0
    eval_seconds: float = 0.0
    diagnostics: dict[str, list[float]] = field(default_factory=dict)

    @property
    def mean_policy_lag(self) -> float:
        """Mean of :attr:`policy_lags` (0.0 for a run that consumed nothing)."""
        return float(np.mean(self.policy_lags)) if self.policy_lags else 0.0

    @property
    def max_policy_lag(self) -> int:
        """Largest of :attr:`policy_lags`."""
        return max(self.policy_lags, default=0)

    @property
    def env_steps_per_second(self) -> float:
        """Env steps the learner consumed per wall-clock second of training."""
        return self.env_steps / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def consumption_steps_per_second(self) -> float:
        """Env steps consumed per second of training with the driver's evaluation seconds
        taken out: the learner's throughput. Exact for a run whose only evaluation is the final
        one, at the end of the budget (nothing consumed while it runs is counted); mid-run
        evaluations overlap training, so there it reads high."""
        seconds = self.wall_seconds - self.eval_seconds
        return self.env_steps / seconds if seconds > 0 else 0.0


def train_impala(config: IMPALAConfig, policy_lag: int = 0, progress: bool = False,
                 **options: Any) -> IMPALAResult:
    """Train IMPALA (or PPO, APPO: see :func:`make_learner`) in this process;
    bit-reproducible for a given config and ``policy_lag``.

    Args:
        config: The run's settings (``num_workers`` runners, each ``envs_per_worker`` envs).
        policy_lag: Act with the weights of this many updates ago (0: on-policy).
        progress: Show a progress bar.
        **options: None are taken: a Ray driver's run option (``num_learners``,
            ``checkpoint_dir``, ...) is refused, naming :func:`train_impala_ray`.
    """
    require_instance("train_impala", "config", config, IMPALAConfig, "train_impala(IMPALAConfig())")
    refuse_other_options("train_impala", options, ("policy_lag", "progress"),
                         "train_impala_ray(config, ...)")
    check_value("policy_lag", policy_lag, int_rule(0, example=4))
    check_value("progress", progress, FLAG)
    torch.set_num_threads(1)
    name, kind = algorithm_name(config), config_action_kind(config)
    runners = [EnvRunner(config.env_id, worker_seed(config.seed, i), kind, name,
                         config.envs_per_worker) for i in range(config.num_workers)]
    obs_dim, n_actions = runners[0].obs_dim, runners[0].action_dim
    learner = make_learner(config, obs_dim, n_actions)
    acting = make_actor_critic(obs_dim, n_actions, config.hidden, kind)
    policy = acting_policy(acting, np.random.default_rng(config.seed))
    past = collections.deque([learner.get_weights()], maxlen=policy_lag + 1)
    history, lags, diagnostics = History(), [], {}
    env_steps, evals, eval_return, solved = 0, 0, float("nan"), False
    bar = ProgressBar(progress, config.total_steps, 0, f"{name} (1 process)")
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
        history.log_loss(env_steps, metrics.pop("loss"))
        for key, value in metrics.items():
            diagnostics.setdefault(key, []).append(value)
        past.append(learner.get_weights())
        if env_steps >= (evals + 1) * config.eval_every or env_steps >= config.total_steps:
            mean, std = greedy_eval(learner.get_weights(), obs_dim, n_actions, config, evals,
                                    make_actor_critic(obs_dim, n_actions, config.hidden, kind))
            history.log_eval(env_steps, time.perf_counter() - start, mean, std)
            evals, eval_return = evals + 1, mean
            solved = config.target_return is not None and mean >= config.target_return
        bar.update(env_steps, eval=f"{eval_return:.0f}")
    wall = time.perf_counter() - start
    bar.close(solved)
    for runner in runners:
        runner.close()
    return IMPALAResult(history=history, solved=solved, eval_return=eval_return,
                        env_steps=env_steps, wall_seconds=wall, updates=learner.updates,
                        weights=learner.get_weights(), policy_lags=lags,
                        diagnostics=diagnostics)
