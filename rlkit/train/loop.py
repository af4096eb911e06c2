"""The single-process training loop, written once for every off-policy algorithm.

Act for ``train_every`` steps, store the transitions, do one gradient update, evaluate every
``eval_every`` steps, and stop at the first evaluation that reaches ``target_return`` (or at
``total_steps``). An :class:`rlkit.core.types.OffPolicyAlgorithm` supplies the learner, the buffer,
the exploration and the evaluation policy. Notebook 01 writes the same loop inline in a dozen
lines and checks that it takes the same steps; this version adds checkpoints, resuming, a
progress bar and interrupt handling around it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlkit.algos.dqn import DQNConfig, DQNSpec
from rlkit.algos.sac import SACConfig, SACSpec
from rlkit.core.common import check_finite, eval_seed, evaluation_due, role_seed
from rlkit.core.metrics import History
from rlkit.core.types import OffPolicyAlgorithm
from rlkit.core.validation import FLAG, check_value, require_instance
from rlkit.envs.evaluation import evaluate_policy
from rlkit.envs.runner import EnvRunner
from rlkit.envs.snapshot import saved_runners
from rlkit.notebook.progress import ProgressBar
from rlkit.replay.nstep import FragmentTransitions
from rlkit.train.checkpoint import (EXACT_RESUME, Checkpoint, Checkpointer,
                                    check_checkpoint_options, load_checkpoint,
                                    resume_with_new_episodes, updates_owed)
from rlkit.train.learner_state import LearnerState, load_learner_state
from rlkit.train.interrupts import interrupts_deferred, save_on_interrupt
from rlkit.train.options import ONE_PROCESS_OPTIONS, refuse_other_options


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


#: Gradient updates between one-process checkpoints when ``checkpoint_every`` is not given.
CHECKPOINT_EVERY = 5_000


def _check_options(progress: Any, checkpoint_buffer: Any, checkpoint_dir: Any,
                   checkpoint_every: Any, resume_from: Any, others: dict[str, Any]) -> None:
    """:func:`train_single_process`'s options, checked before anything is built; ``others``
    (a Ray driver's run option) refused."""
    refuse_other_options("train_single_process", others, ONE_PROCESS_OPTIONS,
                         "train_ray(algo, ...) from rlkit.distributed.off_policy.driver")
    check_value("progress", progress, FLAG)
    check_value("checkpoint_buffer", checkpoint_buffer, FLAG)
    check_checkpoint_options(checkpoint_dir, checkpoint_every, resume_from)


def train_single_process(algo: OffPolicyAlgorithm, *, progress: bool = False,
                         checkpoint_dir: str | Path | None = None,
                         checkpoint_every: int | None = None,
                         checkpoint_buffer: bool = True,
                         resume_from: str | Path | None = None, **options: Any) -> TrainResult:
    """Train ``algo.config`` in this process on the CPU; bit-reproducible for a given seed.

    Args:
        algo: The algorithm (e.g. ``DQNSpec(config)``).
        progress: Show a progress bar.
        checkpoint_dir: Where to keep ``checkpoint.pt`` (see :mod:`rlkit.train.checkpoint`):
            written every ``checkpoint_every`` gradient updates, at the end, and when the run is
            interrupted (``KeyboardInterrupt``, taken at the end of the step in progress).
            ``None``: no checkpoints.
        checkpoint_every: Gradient updates between checkpoints; ``None``: every
            ``CHECKPOINT_EVERY`` (5,000). Given without ``checkpoint_dir``, it is refused.
        checkpoint_buffer: Include the replay buffer in checkpoints.
        resume_from: A checkpoint (file or folder) to continue from: the learner, the buffer
            (if saved), the env-step count and the history carry on; ``config.total_steps`` is
            still the budget for the whole run. From a one-process checkpoint with its buffer,
            the resumed run is bit-identical to the run never stopped (the seconds aside).
        **options: None are taken: a Ray driver's run option (``num_learners``, ...) is
            refused, naming :func:`rlkit.distributed.off_policy.driver.train_ray`.
    """
    config = algo.config
    _check_options(progress, checkpoint_buffer, checkpoint_dir, checkpoint_every, resume_from,
                   options)
    resumed = None if resume_from is None else load_checkpoint(resume_from, algo.name, config)
    torch.set_num_threads(config.torch_threads)
    torch.manual_seed(config.seed)
    history, step, clock_offset = History(), 0, 0.0
    rng = np.random.default_rng(config.seed)
    if resumed is not None:
        history, step, clock_offset = resumed.history, resumed.env_steps, resumed.wall_seconds
    runner = EnvRunner(config.env_id, role_seed(config.seed, "one-process runner", step),
                       algo.action_kind, algo.name, images=algo.images)
    learner, buffer = _learner_and_buffer(algo, runner.env, resumed)
    transitions = FragmentTransitions(config, runner.num_envs)  # one-step or n-step
    losses: list[torch.Tensor] = []
    saved_at = learner.updates  # the periodic checkpoints' schedule counts from here
    if resumed is not None:
        saved_at, how = _restore_run_state(resumed, runner, rng, transitions, losses)
        history.events.append(f"step {step}: resumed from {resumed.path} ({how})")
    net = algo.policy_network_of(learner)  # the learner's own network acts: no copy needed
    policy = algo.exploration_policy(net, runner.env, rng,
                                     lambda: algo.random_action_prob(step))
    bar = ProgressBar(progress, config.total_steps, step, algo.name)
    checkpointer = Checkpointer(checkpoint_dir, checkpoint_every or CHECKPOINT_EVERY,
                                checkpoint_buffer, algo.name, config, saved_at)
    solved, eval_return = False, math.nan

    def flush_losses() -> None:
        if losses:
            mean_loss = float(torch.stack(losses).mean())  # one host sync per flush
            check_finite({"loss": mean_loss}, learner.updates, algo.name)
            history.log_loss(step, mean_loss)
            losses.clear()

    def clock() -> float:
        return clock_offset + time.perf_counter() - start

    def save(periodic: bool = False) -> Path | None:
        # periodic: the schedule restarts here; else (Ctrl-C, the end) it keeps its last base
        base = learner.updates if periodic else checkpointer.saved_at_updates
        return checkpointer.save(lambda with_buffer: LearnerState(
            learner.state_dict(), buffer.state_dict() if with_buffer else None), step, clock(),
            history, lambda: _run_state(runner, rng, transitions, losses, base))

    start = time.perf_counter()
    try:
        with save_on_interrupt(save, lambda: step):
            while step < config.total_steps and not solved:
                with interrupts_deferred():  # checkpoints fall between steps, never inside
                    n = min(config.train_every, config.total_steps - step)
                    fragment = runner.run(n, policy)
                    buffer.add_batch(transitions(fragment))
                    step += len(fragment.batch)  # n: one env, reset steps are not counted
                    for ret in fragment.episode_returns:
                        history.log_episode(step, clock(), ret)
                    if learner.updates < updates_owed(step, config, resumed):
                        report = learner.update(buffer.sample(config.batch_size))
                        losses.append(torch.as_tensor(report.loss))
                        if checkpointer.due(learner.updates):
                            flush_losses()
                            save(periodic=True)
                    if step % 1000 < n:
                        flush_losses()
                    if evaluation_due(step, history.eval_steps, config.eval_every,
                                      config.total_steps):
                        returns = evaluate_greedily(algo, net, len(history.eval_steps))
                        eval_return = float(returns.mean())
                        history.log_eval(step, clock(), eval_return, float(returns.std()))
                        solved = (config.target_return is not None
                                  and eval_return >= config.target_return)
                    if step % 1000 < n or solved:  # redraw rarely: it is not free
                        bar.update(step, explore=f"{algo.random_action_prob(step):.2f}",
                                   ret=f"{history.recent_return():.0f}", eval=f"{eval_return:.0f}")
            flush_losses()
            save()
    finally:
        bar.close(solved)
        runner.close()
    return TrainResult(learner, history, solved, eval_return, step, clock(), checkpointer.last)


def _learner_and_buffer(algo: OffPolicyAlgorithm, env: Any, resumed: Checkpoint | None
                        ) -> tuple[Any, Any]:
    """A CPU learner and buffer for ``algo``, loaded from ``resumed`` if given."""
    learner = algo.make_learner(env, torch.device("cpu"))
    buffer = algo.make_buffer(env, torch.device("cpu"))
    if resumed is not None:
        load_learner_state(learner, resumed.learner)
        if resumed.buffer is not None:
            buffer.load_state_dict(resumed.buffer)
    return learner, buffer


def _run_state(runner: EnvRunner, rng: np.random.Generator, transitions: FragmentTransitions,
               losses: list[torch.Tensor], saved_at: int) -> dict[str, Any]:
    """What a one-process run holds besides its learner and buffer (see
    :mod:`rlkit.train.checkpoint`). ``runner`` is ``None`` for an env whose state rlkit cannot
    copy, with the reason beside it."""
    envs, unsupported = saved_runners([runner])
    return {"runner": envs[0] if envs else None, "unsupported": unsupported,
            "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
            "transitions": transitions.state_dict(),
            "losses": [float(loss) for loss in losses], "saved_at": int(saved_at)}


def _restore_run_state(resumed: Checkpoint, runner: EnvRunner, rng: np.random.Generator,
                       transitions: FragmentTransitions, losses: list[torch.Tensor]
                       ) -> tuple[int, str]:
    """Continue exactly from the checkpoint's run state when it has all of it; else start new
    episodes with an exploration stream seeded by ``(seed, env_steps)``. Returns the update
    count the periodic checkpoints' schedule counts from, and what the resume event says."""
    state = resumed.run_state
    why = ("the checkpoint holds no run state" if state is None
           else "its replay buffer was not saved" if resumed.buffer is None
           else state["unsupported"])
    if why:
        return resumed.updates, resume_with_new_episodes(resumed, rng, why)
    runner.load_state_dict(state["runner"])
    rng.bit_generator.state = state["rng"]
    torch.set_rng_state(state["torch_rng"])
    transitions.load_state_dict(state["transitions"])
    losses.extend(torch.tensor(loss) for loss in state["losses"])
    return state["saved_at"], EXACT_RESUME


def evaluate_greedily(algo: OffPolicyAlgorithm, net: torch.nn.Module, eval_index: int
                      ) -> np.ndarray:
    """``(eval_episodes,)`` returns of ``net``'s policy without exploration, on fresh
    episodes seeded by :func:`rlkit.core.common.eval_seed` for evaluation number ``eval_index``."""
    c = algo.config
    return evaluate_policy(algo.evaluation_policy(net), c.env_id, c.eval_episodes,
                           eval_seed(c.seed, eval_index, c.eval_episodes))


def train_dqn(config: DQNConfig, **options: Any) -> TrainResult:
    """Train DQN in one process: :func:`train_single_process` with
    :class:`rlkit.algos.dqn.DQNSpec`.

    Epsilon-greedy acting, one update every ``config.train_every`` env steps, a greedy
    evaluation (``config.eval_episodes`` episodes, epsilon 0) every ``config.eval_every``
    steps; stops at ``config.total_steps`` or at the first evaluation whose mean reaches
    ``config.target_return``. With the same config the run is bit-reproducible.

    Args:
        config: The run's settings (its worker shape is the Ray driver's: one env here).
        **options: ``progress``, ``checkpoint_dir``, ``checkpoint_every``,
            ``checkpoint_buffer``, ``resume_from``: see :func:`train_single_process`.

    Returns:
        A :class:`TrainResult`; ``result.learner.q`` is the trained Q-network.
    """
    require_instance("train_dqn", "config", config, DQNConfig, "train_dqn(DQNConfig(...))")
    refuse_other_options("train_dqn", options, ONE_PROCESS_OPTIONS, "train_dqn_ray(config, ...)")
    return train_single_process(DQNSpec(config), **options)


def train_sac(config: SACConfig, **options: Any) -> TrainResult:
    """Train SAC in one process on the CPU, the reference the distributed version is held to:
    :func:`train_single_process` with :class:`rlkit.algos.sac.SACSpec`.

    Uniform-random actions for ``learning_starts`` steps, then one update per
    ``train_every`` steps, a deterministic evaluation every ``eval_every`` steps, and a stop at
    the first evaluation that reaches ``target_return`` (or at ``total_steps``).
    ``**options`` (``progress`` and the checkpoint options): see :func:`train_single_process`.
    """
    require_instance("train_sac", "config", config, SACConfig, "train_sac(SACConfig(...))")
    refuse_other_options("train_sac", options, ONE_PROCESS_OPTIONS, "train_sac_ray(config, ...)")
    return train_single_process(SACSpec(config), **options)
