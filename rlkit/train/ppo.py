"""PPO in one process: collect a batch with the current weights, learn from it for a few epochs,
repeat. Reproducible for a given config; the reference the Ray versions are checked against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from rlkit.algos.a2c import greedy_eval, sampling_policy
from rlkit.algos.ppo import PPOConfig, PPOLearner
from rlkit.core.common import worker_seed
from rlkit.core.metrics import History, RunResult
from rlkit.core.validation import FLAG, check_value, require_instance
from rlkit.envs.runner import EnvRunner
from rlkit.notebook.progress import ProgressBar


@dataclass(kw_only=True)
class PPOResult(RunResult):
    """What a PPO run returns: :class:`RunResult` (``updates`` counts batches learned) plus
    PPO's diagnostics, one entry per batch (the mean over its last epoch's minibatches).

    Attributes:
        sgd_steps: Optimiser steps taken.
        approx_kl: Estimated ``KL(pi_old || pi)`` after each batch's epochs: how far one
            batch moved the policy.
        clip_fraction: Share of samples whose ratio left ``[1 - clip, 1 + clip]``.
        batch_steps: Env steps counted when each entry above was logged.
    """

    sgd_steps: int = 0
    approx_kl: list[float] = field(default_factory=list)
    clip_fraction: list[float] = field(default_factory=list)
    batch_steps: list[int] = field(default_factory=list)


def train_ppo(config: PPOConfig, progress: bool = False) -> PPOResult:
    """Train PPO in this process: one runner of ``config.envs_per_worker`` envs, seeded as
    worker 0 of the Ray drivers; a greedy evaluation every ``eval_every`` env steps; stops at
    the first evaluation that reaches ``target_return`` or at ``total_steps``.

    Args:
        config: The run's settings.
        progress: Show a progress bar.
    """
    require_instance("train_ppo", "config", config, PPOConfig, "train_ppo(PPOConfig())")
    check_value("progress", progress, FLAG)
    torch.set_num_threads(config.torch_threads)
    runner = EnvRunner(config.env_id, worker_seed(config.seed, 0), "discrete", "PPO",
                       config.envs_per_worker)
    obs_dim, n_actions = runner.obs_dim, runner.action_dim
    learner = PPOLearner(obs_dim, n_actions, config)
    policy = sampling_policy(learner.net, np.random.default_rng(config.seed))
    history, kl, clip_fraction, batch_steps = History(), [], [], []
    env_steps, solved, eval_return = 0, False, float("nan")
    bar = ProgressBar(progress, config.total_steps, 0, "PPO (1 process)")
    start = time.perf_counter()
    try:
        while env_steps < config.total_steps and not solved:
            fragment = runner.run(config.n_steps, policy, fixed_length=True)
            env_steps += fragment.num_steps
            for ret in fragment.episode_returns:
                history.log_episode(env_steps, time.perf_counter() - start, ret)
            metrics = learner.learn([fragment])
            history.log_loss(env_steps, metrics["loss"])
            kl.append(metrics["approx_kl"])
            clip_fraction.append(metrics["clip_fraction"])
            batch_steps.append(env_steps)
            due = (len(history.eval_steps) + 1) * config.eval_every
            if env_steps >= due or env_steps >= config.total_steps:
                eval_return, std = greedy_eval(learner.get_weights(), obs_dim, n_actions,
                                               config, len(history.eval_steps))
                history.log_eval(env_steps, time.perf_counter() - start, eval_return, std)
                solved = config.target_return is not None and eval_return >= config.target_return
            bar.update(env_steps, eval=f"{eval_return:.0f}")
    finally:
        runner.close()
    wall = time.perf_counter() - start
    bar.close(solved)
    return PPOResult(history=history, solved=solved, eval_return=eval_return,
                     env_steps=env_steps, wall_seconds=wall, updates=learner.updates,
                     weights=learner.get_weights(), sgd_steps=learner.sgd_steps,
                     approx_kl=kl, clip_fraction=clip_fraction, batch_steps=batch_steps)
