"""Small helpers for the notebooks."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any


def show_source(obj: Any) -> None:
    """Display the source of an rlkit function or class, syntax-highlighted, in a notebook.

    The notebooks explain each piece next to the code that runs it; this shows that code
    from the package itself, so the text and the library cannot drift apart.
    """
    from IPython.display import Code, display

    display(Code(inspect.getsource(obj), language="python"))


def config_text(config: Any, width: int = 92) -> str:
    """A config dataclass as ``Name(field=value, ...)`` wrapped between fields, so a narrow
    output never breaks a value in the middle (``print(config)`` is one long line that the
    browser wraps wherever the line ends)."""
    fields = [f"{f.name}={getattr(config, f.name)!r}" for f in dataclasses.fields(config)]
    lines, line = [], f"{type(config).__name__}("
    for i, text in enumerate(fields):
        text += ")" if i == len(fields) - 1 else ","
        if len(line) + 1 + len(text) > width and line.strip():
            lines.append(line)
            line = "    " + text
        else:
            line = f"{line}{'' if line.endswith('(') else ' '}{text}"
    return "\n".join([*lines, line])


def resources_text(resources: dict[str, float]) -> str:
    """``ray.cluster_resources()`` for people: CPUs, GPUs, memory and object store in GiB (Ray
    reports bytes), and any custom resources; the per-node entries left out."""
    gib = 2**30
    parts = [f"{resources.get('CPU', 0):g} CPUs", f"{resources.get('GPU', 0):g} GPUs"]
    if "memory" in resources:
        parts.append(f"{resources['memory'] / gib:.1f} GiB memory")
    if "object_store_memory" in resources:
        parts.append(f"{resources['object_store_memory'] / gib:.1f} GiB object store")
    known = {"CPU", "GPU", "memory", "object_store_memory"}
    parts += [f"{k}={v:g}" for k, v in resources.items()
              if k not in known and not k.startswith("node:")]
    return ", ".join(parts)
