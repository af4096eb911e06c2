"""Record how long a timed ``make test`` took, per notebook, from its JUnit XML.

    CI=true PYTEST_ARGS=--junitxml=/tmp/junit.xml bash -c "time bash .ci/run"
    bash -c "time make check"   (then, with .venv installed: the fast tier alone)
    python -m benchmarks.notebook_runtimes /tmp/junit.xml --install-seconds 80 \\
        --total-seconds 900 --check-seconds 100 --source "fresh clone, ..."

Writes ``benchmarks/results/notebook_runtimes.json``, which ``render_readme`` reads for the
notebook table's "runs in" column.
"""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from benchmarks.common import write_result

NOTEBOOK = re.compile(r"[\w-]+\.ipynb")  # "notebooks.00_ray_core.ipynb" -> "00_ray_core.ipynb"


def summarise(junit: Path) -> dict[str, object]:
    """Seconds per notebook under nbval, for everything in ``tests/``, and for the whole run."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    per_notebook: dict[str, float] = defaultdict(float)
    unit = 0.0
    for case in suite.iter("testcase"):
        seconds = float(case.get("time", 0.0))
        classname = case.get("classname", "")
        if classname.startswith("tests.") or classname.startswith("tests/"):
            unit += seconds  # tests/ (including test_notebooks_twice, whose ids name notebooks)
            continue
        match = NOTEBOOK.search(f"{classname} {case.get('name', '')} {case.get('file', '')}")
        if match is None:
            unit += seconds
        else:
            per_notebook[match.group(0)] += seconds
    return {"notebooks_seconds": dict(sorted(per_notebook.items())),
            "tests_dir_seconds": round(unit, 1),
            "pytest_seconds": round(float(suite.get("time", 0.0)), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path)
    parser.add_argument("--install-seconds", type=float, required=True)
    parser.add_argument("--total-seconds", type=float, required=True)
    parser.add_argument("--check-seconds", type=float, required=True,
                        help="the fast tier, `make check`, with .venv already installed")
    parser.add_argument("--source", required=True)
    parser.add_argument("--test-workers", type=int, default=2,
                        help="test files run at a time (the Makefile's TEST_WORKERS)")
    args = parser.parse_args()
    data = summarise(args.junit)
    write_result("notebook_runtimes", {"source": args.source, **data,
                                       "make_test_total_seconds": args.total_seconds,
                                       "install_seconds": args.install_seconds,
                                       "make_check_seconds": args.check_seconds,
                                       "test_workers": args.test_workers})


if __name__ == "__main__":
    main()
