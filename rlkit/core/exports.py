"""Package-level names imported on first use (PEP 562), so ``from rlkit.algos import DQNConfig``
works while a Ray worker that imports one algorithm's module does not import them all."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any],
                                                                  Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public ``name`` lives in module
    ``exports[name]`` (relative to the package)."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
