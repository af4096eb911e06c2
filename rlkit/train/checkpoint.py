"""Checkpoints: save a training run to one file, and resume it from there.

A checkpoint holds everything needed to continue a run where it stopped: the learner's networks
and optimiser state, its update count, the env-step count, the config, the history (so the
reward curve continues from the same step and second), and optionally the replay buffer. All
training drivers (single process and Ray, DQN and SAC) write the same format, so a run started in
one process can be resumed under Ray and the other way round.

The file is written with ``torch.save`` to a temporary name and then renamed, so a crash while
saving never leaves a half-written checkpoint; it is read with ``torch.load(weights_only=True)``,
which refuses to run code hidden in a file. torch does not check its archive's CRC, so a file
damaged on disk or in transit may load with wrong numbers: each checkpoint carries a SHA-256
digest of its contents (:func:`content_digest`), checked before anything is used. A file
written before the digest existed has none: it loads, unchecked, with a warning that says so.

A one-process run (the off-policy loop, :mod:`rlkit.train.loop`; the on-policy one,
:mod:`rlkit.train.impala`) also saves its **run state**: the envs mid-episode
(:mod:`rlkit.envs.snapshot`), the exploration and torch random streams, and what the loop has
pending (the open n-step windows, the losses not yet logged; the weights a simulated lag acts
with). Resumed from it, the run takes exactly
the steps, updates and evaluations the uninterrupted run takes (bit-identical weights, optimiser,
replay and history; only the seconds and the "resumed" event differ), provided the buffer was
saved and the env's state is plain numbers (every classic-control task; a Box2D env is not, and
its resume starts new episodes, with an event that says why).

A Ray driver saves no run state: its workers' envs and random streams live in other processes
and run ahead of the learner asynchronously, so there is no single moment at which they could
be copied with the learner. Its resume restores the learner (weights, optimiser, update count),
the replay buffer when saved (DQN and SAC with one learner; Ape-X's shards and a learner group's
shares are not saved, and refill), the counts, the clock and the history; the workers start new
episodes with new random streams (:func:`rlkit.core.common.worker_seed` with the incarnation
:func:`rlkit.core.common.resume_generation` counts), so no stream of the first run is replayed.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlkit.core.common import config_dict, resumed_updates_due, with_added_fields
from rlkit.core.metrics import History
from rlkit.core.validation import PATH_RULE, check_value, fail, int_rule
from rlkit.train.integrity import content_digest
from rlkit.train.learner_state import LearnerState, to_cpu

FORMAT_VERSION = 1
FILE_NAME = "checkpoint.pt"
#: What every checkpoint holds besides ``format`` and its ``digest``.
KEYS = ("algorithm", "config", "learner", "buffer", "env_steps", "updates", "wall_seconds",
        "history")
#: Config fields that fix the networks' shapes or the task: a checkpoint only resumes a run
#: whose config agrees on these (budgets, learning rates and the like may change). A field added
#: since a checkpoint was written counts as its default there; a config class without one of
#: them (DQN has no ``shared_encoder``) skips it. (A separate actor's and critic's conv weights
#: loaded into one shared encoder would overwrite each other without an error.)
SHAPE_FIELDS = ("env_id", "hidden", "shared_encoder")


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: The file it was read from.
        algorithm: The algorithm's name (``"DQN"``, ``"SAC"``, ``"IMPALA"``, ``"PPO"``, ...).
        config: The config it was saved with, as a dict.
        learner: The learner's ``state_dict()`` (CPU tensors).
        buffer: The replay buffer's ``state_dict()``, or ``None`` if it was not saved.
        env_steps: Env steps taken when it was saved.
        updates: Gradient updates done when it was saved.
        wall_seconds: Training seconds when it was saved (the resumed clock continues from here).
        history: The run's history up to ``env_steps``.
        run_state: A one-process run's envs, random streams and pending bookkeeping (see the
            module's docstring), or ``None``.
    """

    path: Path
    algorithm: str
    config: dict[str, Any]
    learner: dict[str, Any]
    buffer: dict[str, Any] | None
    env_steps: int
    updates: int
    wall_seconds: float
    history: History
    run_state: dict[str, Any] | None = None


#: What a resume event says of a run that continues from its run state, bit for bit.
EXACT_RESUME = "exactly where it stopped: the envs mid-episode, the same streams"


def resume_with_new_episodes(resumed: Checkpoint, rng: np.random.Generator, why: str) -> str:
    """A one-process resume without the envs' state: the exploration stream ``rng`` reseeded
    by ``(seed, env_steps)`` (never the first run's), and what the resume event says."""
    rng.bit_generator.state = np.random.default_rng(
        [resumed.config["seed"], resumed.env_steps]).bit_generator.state
    return f"new episodes and exploration stream: {why}"


def checkpoint_file(path: str | Path) -> Path:
    """The checkpoint file for ``path``: the path itself, or ``path/checkpoint.pt`` for a
    folder (a ``checkpoint_dir``)."""
    path = Path(path)
    return path / FILE_NAME if path.is_dir() else path


def save_checkpoint(checkpoint_dir: str | Path, algorithm: str, config: Any,
                    learner_state: dict[str, Any], buffer_state: dict[str, Any] | None,
                    env_steps: int, wall_seconds: float, history: History,
                    run_state: dict[str, Any] | None = None) -> Path:
    """Write ``checkpoint_dir/checkpoint.pt`` atomically and return its path.

    Args:
        checkpoint_dir: Folder to write to (created if missing).
        algorithm: The algorithm's name (``"DQN"``, ``"SAC"``, ``"IMPALA"``, ...).
        config: The run's config dataclass.
        learner_state: The learner's ``state_dict()``.
        buffer_state: The buffer's ``state_dict()``, or ``None`` to leave the buffer out.
        env_steps: Env steps taken so far.
        wall_seconds: Training seconds so far.
        history: The run's history.
        run_state: A one-process run's envs, random streams and pending bookkeeping.
    """
    folder = Path(checkpoint_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    payload = {"format": FORMAT_VERSION, "algorithm": algorithm, "config": config_dict(config),
               "learner": to_cpu(learner_state), "buffer": to_cpu(buffer_state),
               "env_steps": int(env_steps), "updates": int(learner_state["updates"]),
               "wall_seconds": float(wall_seconds), "history": history.to_dict()}
    if run_state is not None:
        payload["run_state"] = to_cpu(run_state)
    payload["digest"] = content_digest(payload)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)  # atomic: readers see the old file or the new one, never half of one
    return path


def load_checkpoint(path: str | Path, algorithm: str, config: Any) -> Checkpoint:
    """Read a checkpoint and check that it can resume a run of ``algorithm`` with ``config``.

    Args:
        path: A checkpoint file, or the ``checkpoint_dir`` of an earlier run.
        algorithm: The algorithm about to resume (``"DQN"``, ``"SAC"``, ``"PPO"``, ...).
        config: The config about to be used; it must agree with the checkpoint's on
            :data:`SHAPE_FIELDS`.

    Raises:
        FileNotFoundError: if there is no checkpoint at ``path``.
        ValueError: if the file is not an rlkit checkpoint, is from another algorithm, or was
            trained on another env or network shape. Each message says how to fix it.
    """
    file = checkpoint_file(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"resume_from={str(path)!r}: no checkpoint file at {file}. Fix: pass the "
            f"checkpoint_dir of an earlier run (it holds {FILE_NAME}) or the file itself.")
    try:
        data = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any unreadable file gets the same advice
        raise ValueError(
            f"resume_from={str(path)!r}: {file} is not a readable rlkit checkpoint "
            f"({type(error).__name__}). Fix: pass a file written by an rlkit training run "
            f"with checkpoint_dir=...") from error
    missing = [k for k in KEYS if k not in data] if isinstance(data, dict) else list(KEYS)
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION or missing:
        lacks = f"; it lacks {missing}" if isinstance(data, dict) and missing else ""
        raise ValueError(
            f"resume_from={str(path)!r}: {file} is not an rlkit checkpoint (format "
            f"{FORMAT_VERSION}{lacks}). Fix: pass a file written by an rlkit training run.")
    saved = data.pop("digest", None)  # (checkpoints written before the digest have none)
    if saved is None:
        warnings.warn(f"resume_from={str(path)!r}: {file} has no digest (it was written before "
                      f"rlkit checked its checkpoints), so damage on disk or in transit cannot "
                      f"be detected: it is loaded unchecked. Fix: once resumed, save it again "
                      f"(checkpoint_dir=...), and the new file carries its digest.",
                      UserWarning, stacklevel=2)
    elif content_digest(data) != saved:
        raise ValueError(
            f"resume_from={str(path)!r}: {file} does not match the digest written with it: "
            f"its contents were changed or damaged after it was saved. Fix: resume from "
            f"another copy or an earlier checkpoint, or start without resume_from.")
    if data["algorithm"] != algorithm:
        raise ValueError(
            f"resume_from={str(path)!r} holds a {data['algorithm']} checkpoint, but this run "
            f"trains {algorithm}. Fix: resume it with the {data['algorithm']} trainer, or start "
            f"this run without resume_from.")
    ours, theirs = config_dict(config), with_added_fields(data["config"], config)
    for name in (field for field in SHAPE_FIELDS if field in ours):
        if theirs[name] != ours[name]:
            raise ValueError(
                f"resume_from={str(path)!r} was trained with {name}={theirs[name]!r}, "
                f"but this config has {name}={ours[name]!r}. Fix: use the checkpoint's "
                f"{name} (its whole config is in "
                f"rlkit.train.checkpoint.load_checkpoint(...).config), "
                f"or start without resume_from.")
    history = History.from_dict(data["history"])
    return Checkpoint(file, data["algorithm"], data["config"], data["learner"], data["buffer"],
                      data["env_steps"], data["updates"], data["wall_seconds"], history,
                      data.get("run_state"))


def check_checkpoint_options(checkpoint_dir: str | Path | None, checkpoint_every: int | None,
                             resume_from: str | Path | None) -> None:
    """Validate the drivers' checkpoint arguments; each error names the argument and the fix.
    ``checkpoint_every=None``: the driver's own default; given without ``checkpoint_dir`` it is
    refused (nothing would ever be saved)."""
    if checkpoint_every is not None:
        check_value("checkpoint_every", checkpoint_every,
                    int_rule(1, example=5000, meaning="learner updates between checkpoints"))
    for name, value in (("checkpoint_dir", checkpoint_dir), ("resume_from", resume_from)):
        check_value(name, value, PATH_RULE)
    if checkpoint_every is not None and checkpoint_dir is None:
        fail("checkpoint_every", checkpoint_every, "says how often to save, but checkpoint_dir "
             "is not set, so nothing would be saved", "pass checkpoint_dir=... too, or leave "
             "checkpoint_every out")
    if checkpoint_dir is None:
        return
    folder = Path(checkpoint_dir)
    try:  # a path that cannot be written fails now, not at the first save mid-training
        existing = next(p for p in (folder, *folder.parents) if p.exists() or p == p.parent)
        if existing != folder and not existing.is_dir():
            raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} is inside {existing}, "
                             f"which is a file, so no checkpoint could ever be written. Fix: "
                             f"pass a folder path that does not run through a file.")
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} is a file. Fix: pass a "
                             f"folder; the checkpoint is written to <folder>/{FILE_NAME}.")
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".{FILE_NAME}.probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} cannot be written "
                         f"({type(error).__name__}: {error.strerror}). Fix: pass a folder "
                         f"you can write to.") from error


class Checkpointer:
    """When to save and where the last checkpoint went: the bookkeeping both drivers share.

    Args:
        directory: ``checkpoint_dir``, or ``None`` for no checkpoints (then :meth:`save` does
            nothing).
        every: Gradient updates between checkpoints.
        include_buffer: Put the replay buffer in the file.
        algorithm, config: Written into every checkpoint.
    """

    def __init__(self, directory: str | Path | None, every: int, include_buffer: bool,
                 algorithm: str, config: Any, saved_at_updates: int = 0) -> None:
        self.directory = directory
        self.every = every
        self.include_buffer = include_buffer
        self.algorithm, self.config = algorithm, config
        self.last: Path | None = None  # the last checkpoint written
        self.saved_at_updates = saved_at_updates

    def due(self, updates: int) -> bool:
        """Whether ``every`` updates have passed since the last save."""
        return self.directory is not None and updates - self.saved_at_updates >= self.every

    def save(self, state: Callable[[bool], LearnerState], env_steps: int, seconds: float,
             history: History, run_state: Callable[[], dict[str, Any]] | None = None
             ) -> Path | None:
        """Write a checkpoint; ``state(include_buffer)`` gives the :class:`LearnerState`
        (called only when there is a directory, so a remote learner is asked only then), and
        ``run_state()`` a one-process run's own state."""
        if self.directory is None:
            return None
        parts = state(self.include_buffer)
        self.last = save_checkpoint(self.directory, self.algorithm, self.config,
                                    parts.learner, parts.buffer, env_steps, seconds, history,
                                    None if run_state is None else run_state())
        self.saved_at_updates = int(parts.learner["updates"])
        return self.last


def updates_owed(env_steps: int, config: Any, resumed: Checkpoint | None) -> int:
    """The rate limiter's count after ``env_steps`` env steps of a fresh run (``resumed`` is
    ``None``) or of one resumed from a checkpoint (see
    :func:`rlkit.core.common.resumed_updates_due`)."""
    if resumed is None:
        return resumed_updates_due(env_steps, config.learning_starts, config.train_every)
    return resumed_updates_due(env_steps, config.learning_starts, config.train_every,
                               resumed.env_steps, resumed.updates, resumed.buffer is not None)
