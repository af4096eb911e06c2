"""What the off-policy Ray driver takes besides the algorithm (:class:`RayOptions`, validated
on construction) and what it returns (:class:`RayResult`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlkit.metrics import History
from rlkit.train.checkpoint import check_checkpoint_options
from rlkit.types import Weights


def _require_count(name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}={value!r} must be an int >= 1. Fix: leave it at its "
                         f"default unless you are measuring something.")


@dataclass(frozen=True)
class RayOptions:
    """How :func:`train_ray` runs (not what it learns: that is the algorithm's config).

    Attributes:
        fragment_steps: Env steps per worker call (rounded up to a multiple of
            ``envs_per_worker``).
        envs_per_worker: Environments each worker steps in lockstep.
        publish_every: Learner updates between weight publications.
        max_learner_lag: Learner calls queued before the driver waits for the learner.
        timeout_s: Longest wait for any actor before raising ``TimeoutError`` (start-up may
            take up to ``max(timeout_s, STARTUP_TIMEOUT_S)``).
        learner_gpus: GPUs the learner asks for; ``None``: 1 if the cluster has a GPU, else 0.
        progress: Show a progress bar.
        checkpoint_dir, checkpoint_every, checkpoint_buffer, resume_from: As in
            :func:`rlkit.train.loop.train_single_process` (the same file format, so either
            driver resumes the other's run).
        max_restarts: Restarts allowed per rollout worker and for the evaluator.
        kill_worker_at_step, kill_learner_at_step, kill_evaluator_at_step: Fault injection for
            demos and tests: ``ray.kill`` worker 0 / the learner / the evaluator once this many
            env steps have been collected.
    """

    fragment_steps: int = 100
    envs_per_worker: int = 1
    publish_every: int = 16
    max_learner_lag: int = 2
    timeout_s: float = 120.0
    learner_gpus: float | None = None
    progress: bool = False
    checkpoint_dir: str | Path | None = None
    checkpoint_every: int = 5_000
    checkpoint_buffer: bool = True
    resume_from: str | Path | None = None
    max_restarts: int = 10
    kill_worker_at_step: int | None = None
    kill_learner_at_step: int | None = None
    kill_evaluator_at_step: int | None = None

    def __post_init__(self) -> None:
        for name in ("fragment_steps", "envs_per_worker", "publish_every", "max_learner_lag",
                     "max_restarts"):
            _require_count(name, getattr(self, name))
        t = self.timeout_s
        if not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"timeout_s={t!r} must be a positive number of seconds. Fix: use "
                             f"e.g. 120.0; a hang then surfaces as an error after that long.")
        for name in ("kill_worker_at_step", "kill_learner_at_step", "kill_evaluator_at_step"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{name}={value!r} must be None or an env-step count >= 0.")
        check_checkpoint_options(self.checkpoint_dir, self.checkpoint_every, self.resume_from)


@dataclass
class RayResult:
    """What :func:`train_ray` returns (cf. :class:`rlkit.train.loop.TrainResult`)."""

    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float
    updates: int
    worker_restarts: int
    weights: Weights  # on a solve, the snapshot that reached the target; else the final ones
    learner_busy_seconds: float  # time the learner spent inside add_and_train
    startup_seconds: float  # actor start-up before the training clock started
    device: str  # where the learner ran, e.g. "cpu" or "cuda: NVIDIA H100 ..."
    evaluator_restarts: int = 0
    checkpoint: Path | None = None  # the last checkpoint written
    transitions_stored: int = 0  # in the learner's replay buffer at the end (capacity-capped)


