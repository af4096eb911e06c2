"""What Ray's dashboard costs: the install (``ray[default]`` over plain ``ray``) and a local
instance started with it against one without.

    python -m benchmarks.dashboard [--pairs 3] [--idle-seconds 20]

Install: the packages ``ray[default]`` needs that nothing else in ``requirements.txt`` needs,
found from the installed packages' own metadata, and the bytes their files take. Start-up: each
trial is a fresh process that starts a local 2-CPU instance (``include_dashboard`` true or
false, alternating which goes first in each pair) and records the seconds ``ray.init`` took,
then, with one actor up and nothing running, the CPU seconds per second every Ray process
of the instance used over ``--idle-seconds``, how many processes there were and the memory
they held of their own (USS).
The figures are the medians over pairs. ``ray[default]`` is installed in both arms (it is a
pinned requirement), so what it costs with the dashboard off (every node's agent loads more
modules) is in both and not measured here: that needs a second environment with plain ``ray``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from benchmarks.common import write_result

REQUIREMENTS = Path(__file__).resolve().parents[1] / "requirements.txt"


def _closure(names: list[tuple[str, set[str]]]) -> set[str]:
    """Every installed distribution that ``names`` (name, extras) need, themselves included."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, frozenset[str]]] = set()
    found: set[str] = set()
    todo = [(canonicalize_name(n), frozenset(e)) for n, e in names]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this platform does not install
        found.add(name)
        for line in dist.requires or []:
            req = Requirement(line)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return found


def install_cost() -> dict:
    from packaging.requirements import Requirement

    others = []
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            req = Requirement(line)
            others.append((req.name, set() if req.name == "ray" else set(req.extras)))
    extra = sorted(_closure([("ray", {"default"})]) - _closure(others))
    size = sum(f.locate().stat().st_size for name in extra
               for f in metadata.distribution(name).files or [] if f.locate().is_file())
    return {"packages": extra, "count": len(extra), "megabytes": size / 2**20}


def trial(dashboard: bool, idle_seconds: float) -> dict:
    """One fresh local instance, timed and watched (run in its own process)."""
    import psutil
    import ray

    start = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=dashboard, log_to_driver=False)
    init_s = time.perf_counter() - start

    @ray.remote(num_cpus=0)
    class Idle:
        def ping(self) -> int:
            return 1

    actor = Idle.remote()
    ray.get(actor.ping.remote())
    time.sleep(3.0)  # let the start-up work settle
    me = psutil.Process()

    def ray_cpu() -> float:
        total = 0.0
        for p in me.children(recursive=True):
            try:
                times = p.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                pass
        return total

    before = ray_cpu()
    time.sleep(idle_seconds)
    cpu = (ray_cpu() - before) / idle_seconds
    procs = me.children(recursive=True)
    uss = 0
    for p in procs:  # memory that is the process's own (shared pages and the object store not)
        try:
            uss += p.memory_full_info().uss
        except psutil.Error:
            pass
    ray.shutdown()
    return {"dashboard": dashboard, "init_seconds": init_s, "idle_cpu_cores": cpu,
            "processes": len(procs), "uss_megabytes": uss / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--trial", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        print(json.dumps(trial(args.trial == "on", args.idle_seconds)))
        return
    install = install_cost()
    print(f"ray[default] adds {install['count']} packages, {install['megabytes']:.0f} MB",
          flush=True)
    trials = []
    for pair in range(args.pairs):
        for arm in (("on", "off") if pair % 2 == 0 else ("off", "on")):
            out = subprocess.run([sys.executable, "-m", "benchmarks.dashboard", "--trial", arm,
                                  "--idle-seconds", str(args.idle_seconds)],
                                 check=True, capture_output=True, text=True).stdout
            trials.append(json.loads(out.strip().splitlines()[-1]))
            print(f"pair {pair}: {trials[-1]}", flush=True)
    summary = {}
    for arm, on in (("with_dashboard", True), ("without", False)):
        rows = [t for t in trials if t["dashboard"] is on]
        summary[arm] = {key: statistics.median(t[key] for t in rows)
                        for key in ("init_seconds", "idle_cpu_cores", "processes",
                                    "uss_megabytes")}
    summary["extra_start_seconds"] = (summary["with_dashboard"]["init_seconds"]
                                      - summary["without"]["init_seconds"])
    print(summary)
    write_result("dashboard", {"config": {"pairs": args.pairs, "idle_seconds": args.idle_seconds,
                                          "num_cpus": 2},
                               "install": install, "trials": trials, "summary": summary})


if __name__ == "__main__":
    main()
