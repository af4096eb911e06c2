"""What a learner hands to a checkpoint and takes back from one: its state on the CPU
(:func:`to_cpu`, :class:`LearnerState`), the load that refuses a state that does not fit
(:func:`load_learner_state`), and the ``state()``/``restore()`` pair of the Ray roles that hold
a learner and no replay (:class:`SavesLearner`). The file format is
:mod:`rlkit.train.checkpoint`'s."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch


def to_cpu(tree: Any) -> Any:
    """``tree`` with every tensor moved to the CPU (dicts and lists are rebuilt)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().cpu()
    if isinstance(tree, dict):
        return {k: to_cpu(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(to_cpu(v) for v in tree)
    return tree


def load_learner_state(learner: Any, state: dict[str, Any]) -> None:
    """``learner.load_state_dict(state)`` for a resume, with torch's size-mismatch and
    missing-key errors turned into one that says what to do: a checkpoint whose tensors do not
    fit the networks this run's config builds (a hand-edited file, another env version) is
    refused before a step is trained."""
    try:
        learner.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError) as error:
        detail = " ".join(line.strip() for line in str(error).strip().splitlines()[:3])
        raise ValueError(
            f"resume_from: the checkpoint's learner state does not fit this run's learner "
            f"({type(error).__name__}: {detail[:300]}). Fix: resume with the config the "
            f"checkpoint was saved with (load_checkpoint(path, algorithm, config).config holds "
            f"it), or start without resume_from.") from error


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
        load_learner_state(self.learner, learner_state)
        self.after_restore()
        return int(self.learner.updates)

    def after_restore(self) -> None:  # what follows loading: nothing by default
        return None
