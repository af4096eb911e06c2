"""A description of the machine a benchmark ran on, stored with every result."""

from __future__ import annotations

import os
import platform
from typing import Any


def describe_machine() -> dict[str, Any]:
    import gymnasium
    import numpy
    import ray
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        ram_gib = float("nan")
    return {
        "cpu": cpu, "logical_cores": os.cpu_count(), "ram_gib": round(ram_gib, 1),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "python": platform.python_version(), "torch": torch.__version__,
        "ray": ray.__version__, "gymnasium": gymnasium.__version__, "numpy": numpy.__version__,
    }
