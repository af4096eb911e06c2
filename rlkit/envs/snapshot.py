"""An environment's exact state as plain values, so that a checkpoint can carry it and a resumed
run steps on from the very point where it stopped (mid-episode, the same random streams).

Gymnasium has no ``get_state``/``set_state``. What a classic-control env (CartPole, Pendulum,
Acrobot, MountainCar), its wrappers (``TimeLimit``'s step count, ...) and a vector env of them
hold is numbers: numpy arrays, Python scalars, numpy random generators. :func:`env_state` walks
the object's attributes (into wrappers, the copies of a ``SyncVectorEnv`` and the spaces) and
copies each such value, arrays as tensors and generators as their ``bit_generator.state``, so
that ``torch.load(weights_only=True)`` reads them back and nothing in a checkpoint can run code.
:func:`load_env_state` writes them into a freshly built env of the same kind.

An env that holds anything else (a physics engine's world, a renderer's window) cannot be copied
this way: :func:`env_state` raises :class:`EnvStateUnsupported` naming the attribute, and the
caller falls back to starting new episodes on resume, saying so.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

#: Attributes that describe an env rather than hold its state (its registration, its render
#: metadata, the functions a vector env was built from).
SKIPPED = frozenset({"spec", "metadata", "env_fns", "autoreset_mode", "render_mode"})
_GENERATOR = "__generator__"


class EnvStateUnsupported(ValueError):
    """The env holds state that is not plain numbers; the message names where."""


def _is_gymnasium(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "gymnasium" and hasattr(value, "__dict__")


def _is_description(value: Any) -> bool:
    """A value that describes rather than holds state: a type, an enum member, a dtype, a
    function."""
    return (isinstance(value, type | enum.Enum | np.dtype) or callable(value)) and not (
        _is_gymnasium(value))


def env_state(env: Any) -> dict[str, Any]:
    """Every number ``env`` holds, as a tree of tensors, scalars, tuples, lists and dicts.

    Raises:
        EnvStateUnsupported: if an attribute holds something else (named in the message).
    """
    return _capture(env, "env", set())


def _capture(value: Any, path: str, seen: set[int]) -> Any:
    if isinstance(value, np.random.Generator):
        return {_GENERATOR: value.bit_generator.state}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise EnvStateUnsupported(f"{path} is an array of {value.dtype}")
        return torch.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return type(value)(_capture(v, f"{path}[{i}]", seen) for i, v in enumerate(value))
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _capture(v, f"{path}[{k!r}]", seen) for k, v in value.items()}
    if _is_gymnasium(value):
        if id(value) in seen:  # reached twice (a wrapper's env, a space shared by copies)
            return None
        seen.add(id(value))
        return {name: _capture(v, f"{path}.{name}", seen) for name, v in vars(value).items()
                if name not in SKIPPED and not _is_description(v)}
    raise EnvStateUnsupported(f"{path} is a {type(value).__module__}.{type(value).__qualname__}")


def saved_runners(runners: Sequence[Any]) -> tuple[list[dict[str, Any]] | None, str]:
    """Every runner's ``state_dict()`` (:class:`rlkit.envs.runner.EnvRunner`) for a checkpoint,
    or ``None`` and why: an env whose state rlkit cannot copy (a Box2D world) leaves the run
    state without its envs, and the resume starts new episodes."""
    try:
        return [runner.state_dict() for runner in runners], ""
    except EnvStateUnsupported as error:
        return None, f"{error}, which rlkit cannot save"


def load_env_state(env: Any, state: dict[str, Any]) -> None:
    """Write a state from :func:`env_state` into ``env``, an env built the same way (same id,
    same number of copies); raises ``ValueError`` if the two differ in shape."""
    _restore(env, state, "env")


def _restore(current: Any, saved: Any, path: str) -> Any:
    """The value to put where ``current`` is, from ``saved`` (objects are updated in place)."""
    if isinstance(saved, dict) and _GENERATOR in saved:
        generator = current if isinstance(current, np.random.Generator) else np.random.Generator(
            getattr(np.random, saved[_GENERATOR]["bit_generator"])())
        generator.bit_generator.state = saved[_GENERATOR]
        return generator
    if isinstance(saved, torch.Tensor):
        array = saved.numpy().copy()
        if isinstance(current, np.ndarray):
            if current.shape != array.shape:
                raise ValueError(f"{path} has shape {current.shape} here but {array.shape} in "
                                 f"the checkpoint. Fix: resume with the same env and num_envs.")
        return array  # its own dtype: a state may change dtype as it steps (Acrobot's does)
    if isinstance(saved, list | tuple):
        if isinstance(current, list | tuple) and len(current) != len(saved):
            raise ValueError(f"{path} holds {len(current)} items here but {len(saved)} in the "
                             f"checkpoint. Fix: resume with the same env and num_envs.")
        items = current if isinstance(current, list | tuple) else [None] * len(saved)
        return type(saved)(_restore(c, s, f"{path}[{i}]")
                           for i, (c, s) in enumerate(zip(items, saved)))
    if isinstance(saved, dict):
        if _is_gymnasium(current):
            for name, value in saved.items():
                if value is not None or getattr(current, name, None) is None or not (
                        _is_gymnasium(getattr(current, name))):  # None: reached before
                    setattr(current, name, _restore(getattr(current, name, None), value,
                                                    f"{path}.{name}"))
            return current
        base = current if isinstance(current, dict) else {}
        return {k: _restore(base.get(k), v, f"{path}[{k!r}]") for k, v in saved.items()}
    if isinstance(current, np.generic) and saved is not None:
        return type(current)(saved)
    return saved
