"""What the off-policy Ray driver takes besides the algorithm (:class:`OffPolicyOptions`, validated
on construction) and what it returns (:class:`OffPolicyResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlkit.core.metrics import RunResult
from rlkit.core.validation import fail, flag, integer, number
from rlkit.distributed.runtime.learner_group import check_group_share
from rlkit.distributed.runtime.options import RunOptions


@dataclass(frozen=True)
class OffPolicyOptions(RunOptions):
    """How :func:`train_ray` runs (not what it learns: that is the algorithm's config): the
    options every driver takes (:class:`~rlkit.distributed.runtime.driver.RunOptions`: ``progress``,
    ``timeout_s``, ``max_restarts``, ``kill_at``, ``checkpoint_dir``, ``checkpoint_every``,
    ``resume_from``), plus the off-policy pattern's own. The workers' count and shape are the
    config's (:class:`~rlkit.core.workers.WorkerShape`: ``num_workers``, ``envs_per_worker``,
    ``fragment_steps``).

    Attributes:
        publish_every: Learner updates between weight publications.
        max_learner_lag: Learner calls queued before the driver waits for the learner.
        learner_gpus: GPUs the learner asks for; ``None``: 1 if the cluster has a GPU, else 0.
        checkpoint_buffer: Put the learner's replay buffer in each checkpoint (the other
            checkpoint options are every driver's; the file format is the single-process
            loop's, so either resumes the other's run; ``checkpoint_every`` defaults to 5000).
    """

    publish_every: int = integer(16, 1)
    max_learner_lag: int = integer(2, 1)
    learner_gpus: float | None = number(None, at_least=0, optional=True, example=1)
    checkpoint_buffer: bool = flag(True)


@dataclass(kw_only=True)
class OffPolicyResult(RunResult):
    """What :func:`train_ray` returns: :class:`RunResult`, plus the off-policy pattern's own
    measures (cf. :class:`rlkit.train.loop.TrainResult`).

    Attributes:
        learner_busy_seconds: Time the learner spent inside ``add_and_train``.
        device: Where the learner ran, e.g. ``"cpu"`` or ``"cuda: NVIDIA H100 ..."``.
        evaluator_restarts: Evaluator restarts after a failure.
        checkpoint: The last checkpoint written.
        transitions_stored: In the learner's replay buffer at the end (capacity-capped).
    """

    learner_busy_seconds: float = 0.0
    device: str = "cpu"
    evaluator_restarts: int = 0
    checkpoint: Path | None = None
    transitions_stored: int = 0


def check_replay_shares(batch_size: int, buffer_size: int, num_learners: int) -> None:
    """Refuse a learner group whose ranks cannot each take an equal share of every batch and
    keep a replay share of a batch or more."""
    check_group_share(num_learners, "batch_size", batch_size, "samples")
    if num_learners > 1 and buffer_size // num_learners < batch_size:
        fail("num_learners", num_learners, f"splits buffer_size={buffer_size} into shares "
             f"smaller than a batch ({batch_size})", "use num_learners=1, or a larger "
             "buffer_size")
