"""Small pieces every algorithm and driver shares: TD targets, target-network averaging,
evaluation and worker seeds, when an evaluation is due, finiteness checks, the rate limiter's
arithmetic, and config dicts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import MISSING, asdict, fields
from typing import Any

import torch


def bootstrap_target(rewards: torch.Tensor, terminations: torch.Tensor,
                     next_values: torch.Tensor, gamma: float | torch.Tensor) -> torch.Tensor:
    """One-step TD target ``y = r + gamma * (1 - terminated) * V(s')``.

    A truncated (time-limit) transition has ``terminated = 0`` and so still bootstraps:
    the state it stopped in was not terminal, the episode was merely cut short.

    Args:
        rewards: ``(B,)``.
        terminations: ``(B,)`` 1.0 for a true terminal transition, else 0.0.
        next_values: ``(B,)`` value estimate of the next state.
        gamma: Discount (a float, or ``(B,)`` per-transition discounts such as ``gamma ** n``).

    Returns:
        ``(B,)`` targets.
    """
    return rewards + gamma * (1.0 - terminations) * next_values


@torch.no_grad()
def polyak_update(target: torch.nn.Module, source: torch.nn.Module, tau: float) -> None:
    """``target <- (1 - tau) * target + tau * source``, parameter by parameter.

    ``torch.lerp`` computes exactly ``target + tau * (source - target)``. Looping over the
    parameters is plain public API; :func:`torch._foreach_lerp_` would fuse the loop into one
    call, but it is private and gains nothing measurable at these network sizes.
    """
    for p_target, p in zip(target.parameters(), source.parameters(), strict=True):
        p_target.lerp_(p, tau)


def eval_seed(config_seed: int, eval_index: int, episodes: int) -> int:
    """First episode seed of evaluation ``eval_index``: fresh start states every time, disjoint
    from the training seeds."""
    return 1_000_000 + 10_000 * config_seed + eval_index * episodes


#: Each role's seed: ``(offset, stride)`` in :func:`role_seed`. The offsets keep the roles of one
#: run apart (a worker's streams start at +1000, far from the replay's +1, a shard's +10 + k,
#: a learner rank's +7919 * rank); they are the values each role used before this table, so a
#: run draws what it drew before.
ROLE_SEEDS = {
    "worker": (1000, 1000),  # its envs, exploration and sampling
    "replay": (1, 0),  # a learner's replay buffer (one process and Ray)
    "replay share": (0, 7919),  # rank r's share of a learner group's replay (off-policy)
    "learner sampler": (7, 7919),  # rank r's draws across Ape-X's shards
    "shard": (10, 1),  # Ape-X's replay shard k
    "one-process runner": (0, 1),  # the one-process loop's envs, reseeded at step s on resume
}


def role_seed(config_seed: int, role: str, index: int = 0, incarnation: int = 0) -> int:
    """The one seed formula of every role: ``config_seed + offset + stride * index + 100_000 *
    incarnation`` (:data:`ROLE_SEEDS`), modulo ``2**31`` so it is a valid seed anywhere.
    ``index`` tells copies of a role apart (worker ``i``, rank ``r``, shard ``k``);
    ``incarnation`` counts a role's restarts, plus 1000 per resume of the run
    (:func:`resume_generation`), so no restarted or resumed role draws a stream used before."""
    offset, stride = ROLE_SEEDS[role]
    return (config_seed + offset + stride * index + 100_000 * incarnation) % 2**31


def worker_seed(config_seed: int, worker_index: int, restart: int = 0) -> int:
    """The seed of worker ``worker_index`` in every pattern: :func:`role_seed` of a
    ``"worker"``, ``config_seed + 1000 * (i + 1) + 100_000 * restart``. Workers never share a
    random stream, nor does a restarted worker with the one it replaces (``restart`` counts its
    incarnations; every driver adds 1000 per resume from a checkpoint)."""
    return role_seed(config_seed, "worker", worker_index, restart)


def resume_generation(events: list[str]) -> int:
    """The ``restart`` offset of a run's roles after its resumes: 1000 per ``"resumed from"``
    event in its history, so each resume's workers draw seeds (:func:`worker_seed`) that neither
    the first run nor any earlier resume used, and never meet a restart's (below 1000)."""
    return 1000 * sum("resumed from" in event for event in events)


def check_finite(metrics: dict[str, float], updates: int, algorithm: str) -> None:
    """Raise ``FloatingPointError`` naming ``algorithm`` and the metrics if any is NaN or inf."""
    if not all(math.isfinite(v) for v in metrics.values()):
        raise FloatingPointError(
            f"{algorithm} metrics became non-finite by update {updates}: {metrics}. Fix: lower "
            f"the learning rates, or check the environment's rewards and observations.")


def updates_due(env_steps: int, learning_starts: int, train_every: int) -> int:
    """Gradient updates a run should have done after ``env_steps`` env steps.

    The single-process loop updates at every multiple of ``train_every`` that is past
    ``learning_starts``; this is the number of such multiples up to ``env_steps``, so both
    versions train at the same update-to-data ratio, whatever the two numbers are.
    """
    return max(0, env_steps // train_every - learning_starts // train_every)


def resumed_updates_due(env_steps: int, learning_starts: int, train_every: int,
                        start_env_steps: int = 0, start_updates: int = 0,
                        kept_buffer: bool = True) -> int:
    """Gradient updates a run resumed at ``start_env_steps`` / ``start_updates`` owes after
    ``env_steps`` steps (a fresh run: the defaults, which give :func:`updates_due`).

    A run that kept its replay buffer goes on at the same rate at once; one that did not first
    refills ``learning_starts`` new transitions, as a fresh run would.
    """
    if kept_buffer:
        return (start_updates + updates_due(env_steps, learning_starts, train_every)
                - updates_due(start_env_steps, learning_starts, train_every))
    return start_updates + updates_due(env_steps - start_env_steps, learning_starts, train_every)


def next_multiple(value: int, every: int) -> int:
    """The smallest multiple of ``every`` that is greater than ``value``."""
    return (value // every + 1) * every


def evaluation_due(env_steps: int, eval_steps: Sequence[int], every: int,
                   budget: int | None = None) -> bool:
    """The one evaluation rule of every loop: due once ``env_steps`` reaches the first multiple
    of ``every`` past the last evaluation (``eval_steps[-1]``; 0 before any), and at the end of
    the ``budget``. A resumed run goes on from its history's last evaluation."""
    last = eval_steps[-1] if eval_steps else 0
    return env_steps >= next_multiple(last, every) or (budget is not None and env_steps >= budget)


def config_dict(config: Any) -> dict[str, Any]:
    """A config dataclass as JSON-ready values (tuples become lists, as JSON gives them back)."""
    return _json_values(asdict(config))


def _json_values(values: dict[str, Any]) -> dict[str, Any]:
    """Tuples as lists, as JSON gives them back."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def with_added_fields(recorded: dict[str, Any], config: Any) -> dict[str, Any]:
    """``recorded``, a :func:`config_dict` saved by an earlier version (a benchmark's JSON, a
    checkpoint), with each field ``config``'s class has gained since at its default: a run
    recorded before a field existed ran as its default does. Compare the result with
    ``config_dict(config)``; a recorded field that differs still differs."""
    added = {f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
             for f in fields(config) if f.name not in recorded}
    return {**recorded, **_json_values(added)}
