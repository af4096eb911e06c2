"""The one validation mechanism: each setting declares once what it accepts, and every config,
every driver's options and every public data-structure API check values the same way.

A config is a frozen dataclass that subclasses :class:`Validated` and declares its fields with
the field makers below (:func:`integer`, :func:`number`, :func:`flag`, :func:`text`,
:func:`layers`, :func:`path`, :func:`env_ids`, :func:`role_steps`)::

    @dataclass(frozen=True)
    class MyConfig(Validated):
        gamma: float = number(0.99, at_least=0, below=1)
        hidden: tuple[int, ...] = layers((64, 64))

        def check(self) -> None:  # rules between fields, after each field passed its own
            ...

Construction then refuses, in the caller's process, a string or a bool where a number is
meant, a string where a bool is meant, NaN and infinities, values out of range, and a key the
config does not have; every error is a ``ValueError`` (``TypeError`` for an unknown key) that
names the field as the user wrote it and ends with ``Fix: ...``. :func:`check_value` applies a
rule to a plain argument (a driver's ``num_workers``, a buffer's ``batch_size``).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

RULE = "rlkit.rule"  # the key of a field's rule in its dataclass metadata
T = TypeVar("T")


def fail(field: str, value: Any, rule: str, fix: str) -> None:
    """Raise ``ValueError("<field>=<value> <rule>. Fix: <fix>.")``."""
    raise ValueError(f"{field}={value!r} {rule}. Fix: {fix}.")


def is_int(value: Any) -> bool:
    """An integer that is not a bool (numpy integers count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def is_real(value: Any) -> bool:
    """A real number that is not a bool (numpy floats and ints count, strings do not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """``"> 0"``, ``">= 1"``, ``"<= 1"`` or ``"in [0, 1)"``; ``""`` when unbounded."""
    show = lambda x: f"{x:g}" if isinstance(x, float) else str(x)  # noqa: E731
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{show(low)}, {show(high)}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {show(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {show(high)}"
    return ""


@dataclasses.dataclass(frozen=True)
class Rule:
    """What one setting accepts; :meth:`check` raises naming it and the fix.

    Attributes:
        kind: ``"int"``, ``"number"``, ``"flag"``, ``"text"``, ``"layers"``, ``"path"``,
            ``"env ids"`` or ``"role steps"``.
        low, high, low_open, high_open: The accepted range of a number or an int.
        finite: Whether a number must be finite (``max_grad_norm=math.inf`` may turn
            clipping off).
        optional: Whether ``None`` is accepted.
        example: The value the fix suggests.
        fix: The fix in full, where a suggested value is not enough.
        meaning: What the value is, shown after the rule (``"a probability"``).
    """

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    finite: bool = True
    optional: bool = False
    example: Any = None
    fix: str = ""
    meaning: str = ""

    def describe(self) -> str:
        """The rule in words: ``"must be a finite number in [0, 1)"``."""
        if self.kind in ("int", "number"):
            noun = "an int" if self.kind == "int" else ("a finite number" if self.finite
                                                        else "a number (not NaN)")
            span = _interval(self.low, self.high, self.low_open, self.high_open)
            words = f"must be {noun}{' ' + span if span else ''}"
        else:
            words = {"flag": "must be True or False", "text": "must be a non-empty str",
                     "layers": "must be a non-empty tuple of positive ints",
                     "path": "must be a folder path (str or pathlib.Path)",
                     "role steps": "must be a dict {role name: env steps >= 0}",
                     "env ids": "must be a list holding an env id (str) or None per worker"
                     }[self.kind]
        words += f" ({self.meaning})" if self.meaning else ""
        return words + (" or None" if self.optional else "")

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.optional
        kind = self.kind
        if kind == "flag":
            return isinstance(value, bool | np.bool_)
        if kind == "text":
            return isinstance(value, str) and bool(value)
        if kind == "path":
            return isinstance(value, str | Path) and bool(str(value))
        if kind == "layers":
            return (isinstance(value, tuple | list) and len(value) > 0
                    and all(is_int(h) and h >= 1 for h in value))
        if kind == "env ids":
            return isinstance(value, tuple | list) and all(
                e is None or (isinstance(e, str) and bool(e)) for e in value)
        if kind == "role steps":
            return isinstance(value, Mapping) and all(
                isinstance(k, str) and is_int(v) and v >= 0 for k, v in value.items())
        if not (is_int(value) if kind == "int" else is_real(value)):
            return False
        if math.isnan(value) or (self.finite and math.isinf(value)):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError`` naming ``name`` unless :meth:`accepts` ``value``."""
        if self.accepts(value):
            return
        odd = isinstance(value, str | bool) or (self.kind in ("int", "number", "flag")
                                                 and value is not None and not is_real(value))
        got = f" (got a {type(value).__name__})" if odd else ""
        fix = self.fix or f"use e.g. {name}={self.example!r}"
        fail(name, value, self.describe() + got, fix)


def _field(default: Any, rule: Rule) -> Any:
    if isinstance(default, dict | list):
        return dataclasses.field(default_factory=lambda: type(default)(default),
                                 metadata={RULE: rule})
    return dataclasses.field(default=default, metadata={RULE: rule})


def int_rule(minimum: int | None = 0, maximum: int | None = None, example: Any = None,
             **extra: Any) -> Rule:
    """An int (not a bool) in ``[minimum, maximum]``."""
    return Rule("int", low=minimum, high=maximum, example=example, **extra)


def number_rule(*, above: float | None = None, at_least: float | None = None,
                below: float | None = None, at_most: float | None = None,
                example: Any = None, **extra: Any) -> Rule:
    """A real number (not a bool or a string), finite unless ``finite=False``, in the range the
    bounds give (``above``/``below`` exclusive, ``at_least``/``at_most`` inclusive)."""
    return Rule("number", low=above if above is not None else at_least,
                high=below if below is not None else at_most,
                low_open=above is not None, high_open=below is not None, example=example,
                **extra)


def integer(default: int | None, minimum: int | None = 0, maximum: int | None = None,
            **extra: Any) -> Any:
    """A dataclass field holding an int in ``[minimum, maximum]`` (see :func:`int_rule`)."""
    extra.setdefault("example", default)
    return _field(default, int_rule(minimum, maximum, **extra))


def number(default: float | None, **bounds: Any) -> Any:
    """A dataclass field holding a number (see :func:`number_rule` for the bounds)."""
    bounds.setdefault("example", default)
    return _field(default, number_rule(**bounds))


def flag(default: bool) -> Any:
    """A dataclass field holding ``True`` or ``False`` (not ``"false"``, not 0)."""
    return _field(default, Rule("flag", fix="pass True or False"))


def text(default: str, **extra: Any) -> Any:
    """A dataclass field holding a non-empty string."""
    extra.setdefault("example", default)
    return _field(default, Rule("text", **extra))


def layers(default: tuple[int, ...]) -> Any:
    """A dataclass field holding hidden-layer widths: a non-empty tuple of positive ints."""
    return _field(default, Rule("layers", example=default))


#: A folder path or ``None`` (``checkpoint_dir``, ``resume_from``).
PATH_RULE = Rule("path", optional=True, example="runs/my_run")


def path(default: str | Path | None = None) -> Any:
    """A dataclass field holding a folder path, or ``None``."""
    return _field(default, PATH_RULE)


def env_ids() -> Any:
    """A dataclass field holding an env id (or ``None``) per worker, or ``None``."""
    return _field(None, Rule("env ids", optional=True,
                             fix='use e.g. worker_env_ids=(None, "CartPole-v1")'))


def role_steps(default: dict[str, int]) -> Any:
    """A dataclass field mapping role names to env-step counts (fault injection)."""
    return _field(default, Rule("role steps", fix='use e.g. kill_at={"worker 0": 2_000}'))


def check_value(name: str, value: Any, rule: Rule) -> Any:
    """Apply ``rule`` to a plain argument named ``name``; returns ``value`` unchanged."""
    rule.check(name, value)
    return value


def require_instance(owner: str, arg: str, value: Any, expected: type | tuple[type, ...],
                     fix: str) -> None:
    """Refuse a ``value`` of the wrong type for argument ``arg`` of ``owner`` with a
    ``TypeError`` saying which type it expects (before anything starts)."""
    if not isinstance(value, expected):
        names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple)
                                                 else (expected,)))
        article = "an" if names[0] in "AEIOU" else "a"
        raise TypeError(f"{owner} takes {article} {names} as {arg}, got {type(value).__name__}. "
                        f"Fix: {fix}.")


SEED_MAX = 2**31 - 1  # per-worker offsets keep every derived seed a valid numpy/torch seed
COUNT = int_rule(1, example=2)  # a count of workers, shards, steps: an int >= 1
FLAG = Rule("flag", fix="pass True or False")  # a plain bool argument (progress, evaluate)


def plain(rule: Rule, value: Any) -> Any:
    """``value`` as the plain Python type its rule means (``np.int64(32)`` -> ``32``,
    ``Fraction(1, 1000)`` -> ``0.001``, ``[64, 64]`` -> ``(64, 64)``, a copy of a dict), so a
    config holds what a checkpoint can store and torch can take."""
    if value is None:
        return None
    if rule.kind == "int":
        return int(value)
    if rule.kind == "number":
        return int(value) if is_int(value) else float(value)
    if rule.kind == "flag":
        return bool(value)
    if rule.kind == "layers":
        return tuple(int(h) for h in value)
    if rule.kind == "env ids":  # a tuple: the config stays hashable and unchangeable
        return tuple(value)
    if rule.kind == "role steps":  # a copy the caller cannot edit afterwards
        return {str(k): int(v) for k, v in value.items()}
    return value


def refuse_unknown_keys(cls: type, owner: str, keys: Any, noun: str = "option") -> None:
    """A ``TypeError`` for the first of ``keys`` that dataclass ``cls`` has no field for,
    naming ``owner`` (what the user called) and the closest field."""
    known = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    for key in keys:
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise TypeError(f"{owner} got an unknown {noun} {key!r}. Fix: {hint}it takes "
                            f"{', '.join(known)}.")


class _RefusesUnknownKeys(type):
    """Makes ``Config(gama=0.9)`` an error naming ``gamma``, not Python's bare TypeError."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if dataclasses.is_dataclass(cls):
            refuse_unknown_keys(cls, cls.__name__, kwargs, "setting")
        return super().__call__(*args, **kwargs)


class Validated(metaclass=_RefusesUnknownKeys):
    """Base of every config and options dataclass: checks each field's rule, then
    :meth:`check` (the rules between fields), on construction."""

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):  # type: ignore[arg-type]
            rule, value = item.metadata.get(RULE), getattr(self, item.name)
            if rule is None:
                continue
            rule.check(item.name, value)
            object.__setattr__(self, item.name, plain(rule, value))
        self.check()

    def check(self) -> None:
        """Rules between fields (each field has passed its own); none by default."""


def build(cls: type[T], owner: str, settings: Mapping[str, Any]) -> T:
    """``cls(**settings)``, but an unknown key is a ``TypeError`` naming it, the closest known
    key and ``owner`` (the function the user called)."""
    refuse_unknown_keys(cls, owner, settings)
    return cls(**settings)
