"""Helpers shared by the benchmark scripts: results folder, JSON and PNG output."""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.machine import describe_machine

RESULTS = Path(__file__).resolve().parent / "results"
QUICK_RESULTS = RESULTS / "quick"


def seed_list(text: str) -> list[int]:
    """Seeds as a command line gives them: ``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``; ``""`` -> ``[]``."""
    seeds: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        seeds += list(range(int(low), int(high or low) + 1))
    return seeds


def benchmark_parser(doc: str, seeds: str, seeds_help: str | None = None, *,
                     name: str | None = None, total_steps: int | None = None,
                     workers_help: str | None = None) -> argparse.ArgumentParser:
    """What every benchmark's command line starts with: its docstring's first line, and
    ``--seeds`` (``seeds`` by default), parsed by :func:`seed_list`; with ``name``, ``--name``
    (``results/<name>.json``, that by default); with ``total_steps``, ``--total-steps``; with
    ``workers_help``, ``--workers`` (``None`` by default: the benchmark fills the machine)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=seed_list, default=seeds, help=seeds_help)
    if name is not None:
        parser.add_argument("--name", default=name, help="results/<name>.json")
    if total_steps is not None:
        parser.add_argument("--total-steps", type=int, default=total_steps)
    if workers_help is not None:
        parser.add_argument("--workers", type=int, default=None, help=workers_help)
    return parser


def results_dir() -> Path:
    """``benchmarks/results``, or the folder in ``$RLKIT_BENCH_RESULTS`` (the quick mode writes
    to ``benchmarks/results/quick`` so that it never overwrites the full run's figures)."""
    return Path(os.environ.get("RLKIT_BENCH_RESULTS", RESULTS))


def recorded_at() -> dict[str, Any]:
    """When and from which code a result was measured: the UTC date and the git commit
    (``None`` outside a git checkout; ``dirty`` when tracked files had changes)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(status)}


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` with the machine description, the date and the
    commit added."""
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"machine": describe_machine(), "recorded": recorded_at(),
                                **data}, indent=1))
    print("wrote", path)
    return path


def save_seed(name: str, seed: int, runs: dict[str, dict[str, Any]], **data: Any) -> Path:
    """After each seed of a long benchmark: print that seed's record (its curves left out) and
    write ``runs`` so far with ``data`` (its summary, config...): a run of tens of minutes a
    seed keeps what it finished."""
    print(seed, {k: v for k, v in runs[str(seed)].items() if not k.startswith("eval_")},
          flush=True)
    return write_result(name, {**data, "runs": runs})


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table's lines: ``header``'s cells, the rule under them, then one line per
    row (cells written with ``str``; a row may be shorter than the header)."""
    return ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header),
            *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def interrupt_after(minutes: float | None) -> None:
    """Deliver a Ctrl-C (``SIGINT``) after ``minutes`` (``None``: never; ``0`` cancels a timer
    still running): how ``--minutes`` stops a seed so that a run of fixed length keeps its
    curve (the trainers save a checkpoint on a Ctrl-C). A process started with ``SIGINT``
    ignored (a job put in the background by a shell without job control) gets Python's own
    handler back first: else the timer's Ctrl-C would be dropped and the seed run on."""
    if minutes is not None:
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGALRM, lambda *_: signal.raise_signal(signal.SIGINT))
        signal.setitimer(signal.ITIMER_REAL, 60 * minutes)


def solve_summary(runs: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per run kind, over its seeds (``runs[kind][seed]`` with ``solved``, ``steps_to_solve``,
    ``seconds_to_solve``): how many solved, the medians and ranges, and ms per env step."""
    summary = {}
    for key, by_seed in runs.items():
        walls = [v["seconds_to_solve"] for v in by_seed.values()]
        steps = [v["steps_to_solve"] for v in by_seed.values()]
        summary[key] = {"solved": sum(v["solved"] for v in by_seed.values()),
                        "seeds": len(by_seed),
                        "median_seconds_to_solve": statistics.median(walls),
                        "range_seconds_to_solve": [min(walls), max(walls)],
                        "median_steps_to_solve": statistics.median(steps),
                        "range_steps_to_solve": [min(steps), max(steps)],
                        "ms_per_env_step": 1e3 * sum(walls) / sum(steps)}
    return summary


def save_plot(fig: Any, name: str) -> Path:
    folder = results_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print("wrote", path)
    return path
