"""What the one-process trainers take besides their config, and the refusal of anything else
(a Ray driver's run option, a misspelt name) before any training starts."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

#: What :func:`~rlkit.train.loop.train_dqn` and :func:`~rlkit.train.loop.train_sac` take besides
#: the config.
ONE_PROCESS_OPTIONS = ("progress", "checkpoint_dir", "checkpoint_every", "checkpoint_buffer",
                       "resume_from")


def refuse_other_options(owner: str, options: Mapping[str, Any], accepted: Sequence[str],
                         elsewhere: str) -> None:
    """A ``TypeError`` for the first of ``options`` not in ``accepted``, naming ``owner``, what
    it does take, the closest of those, and ``elsewhere`` (the Ray driver with the run options),
    e.g. a one-process trainer given ``num_learners``."""
    for key, value in options.items():
        if key not in accepted:
            near = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {near[0]!r}? If not, " if near else ""
            takes = ", ".join(accepted) if accepted else "no option besides its config"
            raise TypeError(f"{owner} got {key}={value!r}, which it does not take: it trains in "
                            f"this one process and takes {takes}. Fix: {hint}drop "
                            f"{key}, or, for a run option of the Ray drivers (num_learners, "
                            f"timeout_s, ...), call {elsewhere}.")
