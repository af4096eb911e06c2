"""The single-process training loop, written once for every off-policy algorithm.

Act for ``train_every`` steps, store the transitions, do one gradient update, evaluate every
``eval_every`` steps, and stop at the first evaluation that reaches ``target_return`` (or at
``total_steps``). An algorithm spec (:mod:`rlkit.algorithms`) supplies the learner, the buffer,
the exploration and the evaluation policy; :func:`rlkit.dqn.train_dqn` and
:func:`rlkit.sac.train_sac` are this loop with their spec.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rlkit.algorithms import AlgorithmSpec
from rlkit.dqn import eval_seed
from rlkit.evaluation import evaluate_policy
from rlkit.metrics import History
from rlkit.rollout import EnvRunner
from rlkit.sac import check_finite


@dataclass
class TrainResult:
    """What a single-process run returns.

    Attributes:
        learner: The trained learner (``DQNLearner`` or ``SACLearner``).
        history: The run's :class:`History`.
        solved: Whether an evaluation reached ``config.target_return``.
        eval_return: Mean return of the last evaluation.
        env_steps: Env steps taken.
        wall_seconds: Training wall-clock time from the end of set-up, evaluations included.
    """

    learner: Any
    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float


def train_single_process(spec: AlgorithmSpec, progress: bool = False) -> TrainResult:
    """Train ``spec.config`` in this process on the CPU; bit-reproducible for a given seed."""
    config = spec.config
    torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    runner = EnvRunner(config.env_id, config.seed, spec.action_kind, spec.name)
    env = runner.envs[0]
    learner = spec.make_learner(env, torch.device("cpu"))
    buffer = spec.make_buffer(env, torch.device("cpu"))
    net = spec.policy_network_of(learner)  # the learner's own network acts: no copy needed
    history = History()
    step = 0
    policy = spec.exploration_policy(net, env, rng, lambda: spec.exploration_at(step))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=config.total_steps, unit="step", desc=spec.name)
    losses: list[torch.Tensor] = []
    solved, eval_return = False, math.nan

    def flush_losses() -> None:
        if losses:
            mean_loss = float(torch.stack(losses).mean())  # one host sync per flush
            check_finite({"loss": mean_loss}, learner.updates)
            history.log_loss(step, mean_loss)
            losses.clear()

    start = time.perf_counter()
    try:
        while step < config.total_steps and not solved:
            n = min(config.train_every, config.total_steps - step)
            fragment = runner.run(n, policy)
            buffer.add_batch(fragment.batch)
            step += n
            now = time.perf_counter() - start
            for ret in fragment.episode_returns:
                history.log_episode(step, now, ret)
            if step > config.learning_starts:
                metrics = learner.update(buffer.sample(config.batch_size))
                losses.append(torch.as_tensor(spec.loss_of(metrics)))
            if step % 1000 < n:
                flush_losses()
            if step % config.eval_every < n or step >= config.total_steps:
                returns = evaluate_policy(spec.evaluation_policy(net), config.env_id,
                                          config.eval_episodes,
                                          eval_seed(config.seed, len(history.eval_steps),
                                                    config.eval_episodes))
                eval_return = float(returns.mean())
                history.log_eval(step, time.perf_counter() - start, eval_return,
                                 float(returns.std()))
                solved = config.target_return is not None and eval_return >= config.target_return
            if bar is not None and (step % 1000 < n or solved):  # redraw rarely: it is not free
                bar.update(step - bar.n)
                bar.set_postfix(explore=f"{spec.exploration_at(step):.2f}",
                                ret=f"{history.recent_return():.0f}", eval=f"{eval_return:.0f}")
    finally:
        if bar is not None:
            bar.close()
        runner.close()
    flush_losses()
    return TrainResult(learner, history, solved, eval_return, step, time.perf_counter() - start)
