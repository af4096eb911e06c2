"""Checkpoints: save a training run to one file, and resume it from there.

A checkpoint holds everything needed to continue a run where it stopped: the learner's networks
and optimiser state, its update count, the env-step count, the config, the history (so the
reward curve continues from the same step and second), and optionally the replay buffer. All
training drivers (single process and Ray, DQN and SAC) write the same format, so a run started in
one process can be resumed under Ray and the other way round.

The file is written with ``torch.save`` to a temporary name and then renamed, so a crash while
saving never leaves a half-written checkpoint; it is read with ``torch.load(weights_only=True)``,
which refuses to run code hidden in a file.

What is *not* saved: the environments' mid-episode state and the exploration random stream.
A resumed run starts new episodes and reseeds exploration from ``(seed, env_steps)``, so it
continues the same training but is not bit-identical to a run that was never interrupted.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rlkit.core.common import config_dict, resumed_updates_due
from rlkit.core.metrics import History
from rlkit.core.validation import PATH_RULE, check_value, int_rule

FORMAT_VERSION = 1
FILE_NAME = "checkpoint.pt"
#: Config fields that fix the networks' shapes or the task: a checkpoint only resumes a run
#: whose config agrees on these (budgets, learning rates and the like may change).
SHAPE_FIELDS = ("env_id", "hidden")


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: The file it was read from.
        algorithm: ``"DQN"`` or ``"SAC"``.
        config: The config it was saved with, as a dict.
        learner: The learner's ``state_dict()`` (CPU tensors).
        buffer: The replay buffer's ``state_dict()``, or ``None`` if it was not saved.
        env_steps: Env steps taken when it was saved.
        updates: Gradient updates done when it was saved.
        wall_seconds: Training seconds when it was saved (the resumed clock continues from here).
        history: The run's history up to ``env_steps``.
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


def checkpoint_file(path: str | Path) -> Path:
    """The checkpoint file for ``path``: the path itself, or ``path/checkpoint.pt`` for a
    folder (a ``checkpoint_dir``)."""
    path = Path(path)
    return path / FILE_NAME if path.is_dir() else path


def to_cpu(tree: Any) -> Any:
    """``tree`` with every tensor moved to the CPU (dicts and lists are rebuilt)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: to_cpu(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(to_cpu(v) for v in tree)
    return tree


def save_checkpoint(checkpoint_dir: str | Path, algorithm: str, config: Any,
                    learner_state: dict[str, Any], buffer_state: dict[str, Any] | None,
                    env_steps: int, wall_seconds: float, history: History) -> Path:
    """Write ``checkpoint_dir/checkpoint.pt`` atomically and return its path.

    Args:
        checkpoint_dir: Folder to write to (created if missing).
        algorithm: ``"DQN"`` or ``"SAC"``.
        config: The run's config dataclass.
        learner_state: The learner's ``state_dict()``.
        buffer_state: The buffer's ``state_dict()``, or ``None`` to leave the buffer out.
        env_steps: Env steps taken so far.
        wall_seconds: Training seconds so far.
        history: The run's history.
    """
    folder = Path(checkpoint_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAME
    payload = {"format": FORMAT_VERSION, "algorithm": algorithm, "config": config_dict(config),
               "learner": to_cpu(learner_state), "buffer": to_cpu(buffer_state),
               "env_steps": int(env_steps), "updates": int(learner_state["updates"]),
               "wall_seconds": float(wall_seconds), "history": history.to_dict()}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)  # atomic: readers see the old file or the new one, never half of one
    return path


def load_checkpoint(path: str | Path, algorithm: str, config: Any) -> Checkpoint:
    """Read a checkpoint and check that it can resume a run of ``algorithm`` with ``config``.

    Args:
        path: A checkpoint file, or the ``checkpoint_dir`` of an earlier run.
        algorithm: The algorithm about to resume (``"DQN"`` or ``"SAC"``).
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
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"resume_from={str(path)!r}: {file} is not an rlkit checkpoint (format "
            f"{FORMAT_VERSION}). Fix: pass a file written by an rlkit training run.")
    if data["algorithm"] != algorithm:
        raise ValueError(
            f"resume_from={str(path)!r} holds a {data['algorithm']} checkpoint, but this run "
            f"trains {algorithm}. Fix: resume it with the {data['algorithm']} trainer, or start "
            f"this run without resume_from.")
    ours = config_dict(config)
    for name in SHAPE_FIELDS:
        if data["config"][name] != ours[name]:
            raise ValueError(
                f"resume_from={str(path)!r} was trained with {name}={data['config'][name]!r}, "
                f"but this config has {name}={ours[name]!r}. Fix: use the checkpoint's "
                f"{name} (its whole config is in rlkit.checkpoint.load_checkpoint(...).config), "
                f"or start without resume_from.")
    history = History.from_dict(data["history"])
    return Checkpoint(file, data["algorithm"], data["config"], data["learner"], data["buffer"],
                      data["env_steps"], data["updates"], data["wall_seconds"], history)


def check_checkpoint_options(checkpoint_dir: str | Path | None, checkpoint_every: int,
                             resume_from: str | Path | None) -> None:
    """Validate the drivers' checkpoint arguments; each error names the argument and the fix."""
    check_value("checkpoint_every", checkpoint_every,
                int_rule(1, example=5000, meaning="learner updates between checkpoints"))
    for name, value in (("checkpoint_dir", checkpoint_dir), ("resume_from", resume_from)):
        check_value(name, value, PATH_RULE)
    if checkpoint_dir is not None:
        existing = next(p for p in (Path(checkpoint_dir), *Path(checkpoint_dir).parents)
                        if p.exists() or p == p.parent)
        if existing != Path(checkpoint_dir) and not existing.is_dir():
            raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} is inside {existing}, "
                             f"which is a file, so no checkpoint could ever be written. Fix: "
                             f"pass a folder path that does not run through a file.")
    if checkpoint_dir is not None and Path(checkpoint_dir).exists() \
            and not Path(checkpoint_dir).is_dir():
        raise ValueError(f"checkpoint_dir={str(checkpoint_dir)!r} is a file. Fix: pass a "
                         f"folder; the checkpoint is written to <folder>/{FILE_NAME}.")


class LearnerState(NamedTuple):
    """What a learner hands to a checkpoint: its ``state_dict()`` (with an ``"updates"``
    count) and its replay buffer's, or ``None`` when the buffer is left out."""

    learner: dict[str, Any]
    buffer: dict[str, Any] | None


class SavesLearner:
    """The ``state()``/``restore()`` a driver's checkpoints call, for a role holding
    ``self.learner`` and no replay (a publishing role overrides :meth:`after_restore`)."""

    learner: Any  # state_dict(), load_state_dict(), updates

    def state(self, include_buffer: bool = False) -> LearnerState:  # on the CPU
        return LearnerState(to_cpu(self.learner.state_dict()), None)

    def restore(self, learner_state: dict[str, Any], buffer_state: Any = None) -> int:
        """Load a checkpoint's learner state; the update count."""
        self.learner.load_state_dict(learner_state)
        self.after_restore()
        return int(self.learner.updates)

    def after_restore(self) -> None:  # what follows loading: nothing by default
        return None


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
             history: History) -> Path | None:
        """Write a checkpoint; ``state(include_buffer)`` gives the :class:`LearnerState`
        (called only when there is a directory, so a remote learner is asked only then)."""
        if self.directory is None:
            return None
        parts = state(self.include_buffer)
        self.last = save_checkpoint(self.directory, self.algorithm, self.config,
                                    parts.learner, parts.buffer, env_steps, seconds, history)
        self.saved_at_updates = int(parts.learner["updates"])
        return self.last


@contextmanager
def save_on_interrupt(save: Callable[[], Path | None], env_steps: Callable[[], int]
                      ) -> Iterator[None]:
    """On ``KeyboardInterrupt`` (JupyterLab's stop button), save a checkpoint, say where, and
    let the interrupt through. A save that fails is reported, not raised: the interrupt is what
    the person asked for."""
    try:
        yield
    except KeyboardInterrupt:
        try:
            path = save()
            if path is not None:
                print(f"interrupted at env step {env_steps()}; checkpoint saved to {path}")
        except Exception as error:  # noqa: BLE001 - the interrupt is what matters
            print(f"interrupted; no checkpoint saved ({type(error).__name__}: {error})")
        raise


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back a Ctrl-C (``SIGINT``, JupyterLab's stop button) that arrives inside the block
    until the block has ended, then deliver it.

    Wraps bookkeeping that a checkpoint must see whole: transitions handed to the buffer and
    the env-step count that says how many there are. An interrupt between the two would save
    a checkpoint whose count and buffer disagree. Outside the main thread (where Python
    delivers signals), or where the handler was not set from Python, it does nothing.

    Cost: two ``sigaction`` calls, about 8 us per block on the 2-core CI machine. The loops
    enter it once per fragment (single process: every ``train_every`` env steps, 0.3-0.6% of
    a DQN or SAC step there; Ray driver: once per 100-step fragment).
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is None):
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)  # now, through the handler that was there


def updates_owed(env_steps: int, config: Any, resumed: Checkpoint | None) -> int:
    """The rate limiter's count after ``env_steps`` env steps of a fresh run (``resumed`` is
    ``None``) or of one resumed from a checkpoint (see
    :func:`rlkit.core.common.resumed_updates_due`)."""
    if resumed is None:
        return resumed_updates_due(env_steps, config.learning_starts, config.train_every)
    return resumed_updates_due(env_steps, config.learning_starts, config.train_every,
                               resumed.env_steps, resumed.updates, resumed.buffer is not None)
