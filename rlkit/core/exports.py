"""Package-level names imported on first use (PEP 562), so ``from rlkit.algos import DQNConfig``
works while a Ray worker that imports one algorithm's module does not import them all."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]
                 ) -> tuple[dict[str, str], Callable[[str], Any], Callable[[], list[str]]]:
    """For ``package``, whose module ``m`` (relative to it) defines the names
    ``modules[m]``: ``{name: module}``, and the package's ``__getattr__`` and ``__dir__``."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return where, __getattr__, __dir__
