"""`make bench`: run every benchmark script, then re-render the README's results block.

    python -m benchmarks.run_all [--quick]

``--quick`` runs one seed per algorithm (a few minutes) instead of three.
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seeds = "0" if args.quick else "0,1,2"
    for command in (["benchmarks.time_to_solve", "--seeds", seeds], ["benchmarks.render_readme"]):
        subprocess.run([sys.executable, "-m", *command], check=True)


if __name__ == "__main__":
    main()
