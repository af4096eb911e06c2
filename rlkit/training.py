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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlkit.algorithms import AlgorithmSpec
from rlkit.checkpoint import check_checkpoint_options, load_checkpoint, save_checkpoint
from rlkit.dqn import eval_seed
from rlkit.evaluation import evaluate_policy
from rlkit.metrics import History
from rlkit.rollout import EnvRunner
from rlkit.sac import check_finite
from rlkit.update_schedule import resumed_updates_due


@dataclass
class TrainResult:
    """What a single-process run returns.

    Attributes:
        learner: The trained learner (``DQNLearner`` or ``SACLearner``).
        history: The run's :class:`History`.
        solved: Whether an evaluation reached ``config.target_return``.
        eval_return: Mean return of the last evaluation.
        env_steps: Env steps taken.
        wall_seconds: Training wall-clock time from the end of set-up, evaluations included
            (for a resumed run, including the time before the checkpoint).
        checkpoint: The last checkpoint written, or ``None``.
    """

    learner: Any
    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float
    checkpoint: Path | None = None


def train_single_process(spec: AlgorithmSpec, progress: bool = False,
                         checkpoint_dir: str | Path | None = None, checkpoint_every: int = 5_000,
                         checkpoint_buffer: bool = True,
                         resume_from: str | Path | None = None) -> TrainResult:
    """Train ``spec.config`` in this process on the CPU; bit-reproducible for a given seed.

    Args:
        spec: The algorithm spec.
        progress: Show a tqdm progress bar.
        checkpoint_dir: Where to keep ``checkpoint.pt`` (see :mod:`rlkit.checkpoint`): written
            every ``checkpoint_every`` gradient updates, at the end, and when the run is
            interrupted (``KeyboardInterrupt``; an update the interrupt cut short may be partly
            applied). ``None``: no checkpoints.
        checkpoint_every: Gradient updates between checkpoints.
        checkpoint_buffer: Include the replay buffer in checkpoints.
        resume_from: A checkpoint (file or folder) to continue from: the learner, the buffer
            (if saved), the env-step count and the history carry on; ``config.total_steps`` is
            still the budget for the whole run.
    """
    config = spec.config
    check_checkpoint_options(checkpoint_dir, checkpoint_every, resume_from)
    resumed = None if resume_from is None else load_checkpoint(resume_from, spec.name, config)
    torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    history, step, clock_offset = History(), 0, 0.0
    rng = np.random.default_rng(config.seed)
    if resumed is not None:
        history, step, clock_offset = resumed.history, resumed.env_steps, resumed.wall_seconds
        # new episodes and a fresh exploration stream: the envs' mid-episode state is not saved
        rng = np.random.default_rng([config.seed, step])
        history.events.append(f"step {step}: resumed from {resumed.path}")
    runner = EnvRunner(config.env_id, config.seed + step, spec.action_kind, spec.name)
    env = runner.envs[0]
    learner = spec.make_learner(env, torch.device("cpu"))
    buffer = spec.make_buffer(env, torch.device("cpu"))
    if resumed is not None:
        learner.load_state_dict(resumed.learner)
        if resumed.buffer is not None:
            buffer.load_state_dict(resumed.buffer)
    net = spec.policy_network_of(learner)  # the learner's own network acts: no copy needed
    policy = spec.exploration_policy(net, env, rng, lambda: spec.exploration_at(step))
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=config.total_steps, initial=step, unit="step", desc=spec.name)
    losses: list[torch.Tensor] = []
    solved, eval_return = False, math.nan
    last_checkpoint: Path | None = None

    def flush_losses() -> None:
        if losses:
            mean_loss = float(torch.stack(losses).mean())  # one host sync per flush
            check_finite({"loss": mean_loss}, learner.updates)
            history.log_loss(step, mean_loss)
            losses.clear()

    def save() -> None:
        nonlocal last_checkpoint
        if checkpoint_dir is not None:
            last_checkpoint = save_checkpoint(
                checkpoint_dir, spec.name, config, learner.state_dict(),
                buffer.state_dict() if checkpoint_buffer else None, step,
                clock_offset + time.perf_counter() - start, history)

    start = time.perf_counter()
    try:
        while step < config.total_steps and not solved:
            n = min(config.train_every, config.total_steps - step)
            fragment = runner.run(n, policy)
            buffer.add_batch(fragment.batch)
            step += n
            now = clock_offset + time.perf_counter() - start
            for ret in fragment.episode_returns:
                history.log_episode(step, now, ret)
            if learner.updates < resumed_updates_due(step, resumed, config.learning_starts,
                                                     config.train_every):
                metrics = learner.update(buffer.sample(config.batch_size))
                losses.append(torch.as_tensor(spec.loss_of(metrics)))
                if checkpoint_dir is not None and learner.updates % checkpoint_every == 0:
                    flush_losses()
                    save()
            if step % 1000 < n:
                flush_losses()
            if step % config.eval_every < n or step >= config.total_steps:
                returns = evaluate_policy(spec.evaluation_policy(net), config.env_id,
                                          config.eval_episodes,
                                          eval_seed(config.seed, len(history.eval_steps),
                                                    config.eval_episodes))
                eval_return = float(returns.mean())
                history.log_eval(step, clock_offset + time.perf_counter() - start, eval_return,
                                 float(returns.std()))
                solved = config.target_return is not None and eval_return >= config.target_return
            if bar is not None and (step % 1000 < n or solved):  # redraw rarely: it is not free
                bar.update(step - bar.n)
                bar.set_postfix(explore=f"{spec.exploration_at(step):.2f}",
                                ret=f"{history.recent_return():.0f}", eval=f"{eval_return:.0f}")
        flush_losses()
        save()
    except KeyboardInterrupt:
        # the learner pressed stop: keep what was learned, then let the interrupt through
        losses.clear()
        save()
        if last_checkpoint is not None:
            print(f"interrupted at env step {step}; checkpoint saved to {last_checkpoint}")
        raise
    finally:
        if bar is not None:
            bar.close()
        runner.close()
    return TrainResult(learner, history, solved, eval_return, step,
                       clock_offset + time.perf_counter() - start, last_checkpoint)
