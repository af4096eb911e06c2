"""Helpers shared by the benchmark scripts: results folder, JSON and PNG output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` with the machine description added."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": describe_machine(), **data}, indent=1))
    print("wrote", path)
    return path


def save_plot(fig: Any, name: str) -> Path:
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print("wrote", path)
    return path
