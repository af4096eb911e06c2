"""The options every distributed driver takes (how a run runs; what it learns is the config's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rlkit.core.validation import Validated, fail, flag, integer, number, path, role_steps
from rlkit.train.checkpoint import check_checkpoint_options


@dataclass(frozen=True)
class RunOptions(Validated):
    """How a distributed run runs, the same for every driver (what it learns is the config's).

    Attributes:
        progress: Show a progress bar.
        timeout_s: Longest wait for any actor before a ``TimeoutError`` naming its role
            (start-up may take up to ``max(timeout_s, STARTUP_TIMEOUT_S)``).
        max_restarts: Restarts allowed per restartable role (each worker, the evaluator).
        kill_at: Fault injection for demos and tests: ``{role: env_steps}`` kills that role
            (``ray.kill``) once the run has counted that many env steps, e.g.
            ``{"worker 0": 2_000}``; the run then meets the failure as a real one.
        checkpoint_dir: Folder for ``checkpoint.pt``: written every ``checkpoint_every``
            learner updates, at the end, and on Ctrl-C (then the interrupt goes through).
        checkpoint_every: Learner updates between checkpoints; ``None``: the driver's own
            default (:attr:`DriverRun.CHECKPOINT_EVERY`).
        resume_from: A checkpoint file or an earlier run's ``checkpoint_dir``: the run goes on
            from its env steps, updates, history and clock (the learner's state is restored;
            replay contents only where the driver saves them).
        num_learners: Learner ranks: a learner group, each rank on its share of every batch,
            gradients averaged (where the driver runs groups; see
            :attr:`DriverRun.LEARNER_GROUPS`).
        learner_restarts: Times the learner (the whole group) may be restarted from the last
            checkpoint when a rank is lost (needs ``checkpoint_dir``); 0: a lost learner ends
            the run with an error naming the checkpoint to resume from.
        timeline: Record the run's timeline (``result.timeline``; its cost is measured by
            ``python -m benchmarks.timeline``); ``False``: record nothing.
    """

    progress: bool = flag(False)
    timeout_s: float = number(120.0, at_least=1.0, fix="use e.g. timeout_s=120.0; a hang "
                              "then surfaces as an error after that long (below 1 s, ordinary "
                              "calls to a busy actor would time out)", meaning="seconds")
    max_restarts: int = integer(3, 0)
    kill_at: Mapping[str, int] = role_steps({})
    checkpoint_dir: str | Path | None = path()
    checkpoint_every: int | None = integer(None, 1, optional=True, example=500)
    resume_from: str | Path | None = path()
    num_learners: int = integer(1, 1)
    learner_restarts: int = integer(0, 0)
    timeline: bool = flag(True)

    def check(self) -> None:
        check_checkpoint_options(self.checkpoint_dir, self.checkpoint_every, self.resume_from)
        if self.learner_restarts and self.checkpoint_dir is None:
            fail("learner_restarts", self.learner_restarts, "restarts the learner from its "
                 "last checkpoint, but checkpoint_dir is not set", "pass checkpoint_dir=... too")
