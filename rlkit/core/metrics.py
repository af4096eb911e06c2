"""Training history (what happened, against env steps and wall-clock seconds) and the fields
every distributed run returns (:class:`RunResult`)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlkit.core.timeline import Span
from rlkit.core.types import Weights


@dataclass
class History:
    """Everything a training run records, as plain lists (JSON-friendly).

    Training episodes, greedy evaluations and losses are each logged against the number of env
    steps taken so far and the wall-clock seconds since training started.
    """

    episode_steps: list[int] = field(default_factory=list)
    episode_seconds: list[float] = field(default_factory=list)
    episode_returns: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_seconds: list[float] = field(default_factory=list)
    eval_returns: list[float] = field(default_factory=list)  # mean over the eval episodes
    eval_stds: list[float] = field(default_factory=list)
    loss_steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)  # mean loss since the previous entry
    events: list[str] = field(default_factory=list)  # e.g. "worker 1 restarted at step 30000"

    def log_episode(self, step: int, seconds: float, episode_return: float) -> None:
        self.episode_steps.append(int(step))
        self.episode_seconds.append(float(seconds))
        self.episode_returns.append(float(episode_return))

    def log_eval(self, step: int, seconds: float, mean: float, std: float) -> None:
        self.eval_steps.append(int(step))
        self.eval_seconds.append(float(seconds))
        self.eval_returns.append(float(mean))
        self.eval_stds.append(float(std))

    def log_loss(self, step: int, loss: float) -> None:
        self.loss_steps.append(int(step))
        self.losses.append(float(loss))

    def recent_return(self, episodes: int = 20) -> float:
        """Mean training return of the last ``episodes`` episodes (NaN before the first)."""
        tail = self.episode_returns[-episodes:]
        return sum(tail) / len(tail) if tail else math.nan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> History:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(kw_only=True)
class RunResult:
    """The fields every distributed run returns; each pattern's result extends it.

    Attributes:
        history: Training episodes, evaluations and losses against env steps and seconds;
            restarts and other events in ``history.events``.
        solved: Whether a greedy evaluation reached the config's ``target_return``.
        eval_return: Mean return of the last evaluation.
        env_steps: Env steps the run counted (collected, or consumed by the learner).
        wall_seconds: Training time, from the end of the actors' start-up.
        updates: Learner updates (gradient steps) applied.
        weights: On a solve, the weights that reached the target; else the final ones.
        startup_seconds: Time the actors took to start.
        worker_restarts: Workers replaced after a failure.
        placement: ``{role: node id}``: the node each role's actor started on (read from
            Ray once all were up; a replacement's node is in ``history.events``).
        timeline: Every call the driver made and every answer it handled, as
            :class:`~rlkit.core.timeline.Span` s in the run's clock (:mod:`rlkit.core.timeline`).
    """

    history: History
    solved: bool
    eval_return: float
    env_steps: int
    wall_seconds: float
    updates: int
    weights: Weights
    startup_seconds: float = 0.0
    worker_restarts: int = 0
    placement: dict[str, str] = field(default_factory=dict)
    timeline: list[Span] = field(default_factory=list)


def repo_root() -> Path:
    """The repository root (the folder holding ``rlkit/``), whatever the working directory."""
    return Path(__file__).resolve().parents[2]  # rlkit/core/metrics.py -> the repository


def results_dir() -> Path:
    """Where the notebooks keep their results: ``<repo>/results``, or ``$RLKIT_RESULTS_DIR``.

    Each notebook writes ``<name>.json`` there (its curves and numbers); later notebooks and the
    README read them. The variable points a run elsewhere, e.g. to an empty folder to check that
    every notebook also runs on its own (``tests/test_notebooks_standalone.py``).
    """
    folder = os.environ.get("RLKIT_RESULTS_DIR")
    return Path(folder) if folder else repo_root() / "results"


def save_results(name: str, results: dict[str, Any]) -> Path:
    """Write ``results`` to ``results_dir() / f"{name}.json"`` and return the path."""
    path = results_dir() / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    return path


def load_results(name: str) -> dict[str, Any] | None:
    """Read ``results_dir() / f"{name}.json"``, or ``None`` if no run has written it yet."""
    path = results_dir() / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def saved_results(*names: str) -> dict[str, dict[str, Any]]:
    """Other notebooks' results that are on disk, by name; one printed line per missing one.

    A notebook that compares itself with earlier ones draws what exists and says what is
    missing, so it still runs top to bottom on its own (in a fresh checkout, or after ``make
    clean``): ``results/05_a3c.json is absent: run notebook 05 to add it``.
    """
    found = {}
    for name in names:
        result = load_results(name)
        if result is None:
            print(f"results/{name}.json is absent: run notebook {name[:2]} to add it")
        else:
            found[name] = result
    return found
