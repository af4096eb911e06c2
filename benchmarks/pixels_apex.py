"""Ape-X DQN on Breakout-MinAtar from its frames, on Ray, 1 worker against 2, and the
one-process DQN run in the same invocation, back to back, to the same budget: frames per second,
frames and minutes to a greedy mean of 5 and 10, and the workers' parked share (notebook 09 draws
them from the JSON).

The settings are :data:`rlkit.algos.dqn.BREAKOUT_MINATAR` for all (3-step returns, one update per
2 frames, the same network and target cadence), so the learner's update schedule is the same:
Ape-X's rate limiter asks it for the updates the frames collected are owed (``updates_due``), as
the one-process loop does. What differs is who acts and what is replayed: the one-process loop
steps one env with epsilon decaying from 1 and replays uniformly; Ape-X has 1 or 2 workers of 8
envs each with a fixed ladder of epsilons, fragments of 64 steps to one prioritized replay shard,
a learner actor and an evaluator actor beside them. A greedy evaluation of 20 episodes every
10,000 frames (in one process it pauses the loop; on Ray it runs beside training). Writes
``benchmarks/results/pixels_apex.json`` after every run.

    python -m benchmarks.pixels_apex [--seeds 0] [--workers 1,2] [--total-steps 60000]
"""

from __future__ import annotations

import dataclasses
import time

from benchmarks.common import benchmark_parser, save_seed, seed_list, table
from benchmarks.pixels import reach_cells, run_record, summarize
from rlkit.algos.dqn import BREAKOUT_MINATAR
from rlkit.core.common import config_dict

#: Envs per worker and steps per fragment (a fragment is 512 frames).
ENVS_PER_WORKER, FRAGMENT_STEPS = 8, 64


def readme_lines(data: dict) -> list[str]:
    """The README's block for ``benchmarks/results/pixels_apex.json``."""
    m = data["machine"]
    lines = [f"**Ape-X DQN on Breakout-MinAtar from pixels** (`python -m benchmarks.pixels_apex`"
             f": {m['cpu']}, {m['logical_cores']} logical cores; the one-process DQN run back to "
             f"back with it; `BREAKOUT_MINATAR`, one update per 2 frames; greedy mean of 20 "
             f"episodes every 10,000 frames)", ""]
    return lines + table(("workers", "seed", "frames", "frames/s", "updates/s", "frames to 5",
                          "minutes to 5", "best eval", "workers parked"),
                         (apex_row(key, r) for key, r in data["runs"].items())) + [""]


def apex_row(key: str, r: dict) -> tuple:
    """One run's cells in :func:`readme_lines`' table (``key``: ``"<workers>/<seed>"``)."""
    parked = f"{r['parked_share']:.0%}" if r.get("parked_share") is not None else "-"
    return (*key.split("/"), f"{r['env_steps']:,}", f"{r['frames_per_second']:.0f}",
            f"{r['updates_per_second']:.0f}", *reach_cells(r["reach"]["5"]),
            f"{max(r['eval_returns']):.1f}", parked)


def main() -> None:
    parser = benchmark_parser(__doc__, "0", name="pixels_apex", total_steps=60_000)
    parser.add_argument("--workers", type=seed_list, default="1,2",
                        help="the worker counts to run, e.g. 1,2")
    args = parser.parse_args()

    import ray

    from rlkit.algos.apex import ApexConfig, ApexDQN
    from rlkit.distributed import init_ray, train_apex_ray
    from rlkit.train import train_dqn

    runs: dict = {}
    base = dataclasses.replace(BREAKOUT_MINATAR, total_steps=args.total_steps)

    def save(key: str) -> None:
        groups = {k.split("/")[0] for k in runs}
        save_seed(args.name, key, runs, summary={g: summarize(
            {k: v for k, v in runs.items() if k.split("/")[0] == g}, args.total_steps)
            for g in sorted(groups)}, config=config_dict(base), total_steps=args.total_steps)

    for seed in args.seeds:  # the reference first, in this process, before Ray starts
        begin = time.perf_counter()
        r = train_dqn(dataclasses.replace(base, seed=seed))
        runs[f"one process/{seed}"] = {**run_record(r, r.learner.updates, "cpu", begin),
                                       "workers": 0, "parked_share": None}
        save(f"one process/{seed}")
    init_ray()
    try:
        for workers in args.workers:
            for seed in args.seeds:
                config = dataclasses.replace(
                    base, seed=seed, num_workers=workers, envs_per_worker=ENVS_PER_WORKER,
                    fragment_steps=FRAGMENT_STEPS)
                begin = time.perf_counter()
                r = train_apex_ray(ApexDQN(config, ApexConfig(num_shards=1)))
                key = f"{workers}/{seed}"
                runs[key] = {**run_record(r, r.updates, "cpu", begin), "workers": workers,
                             "parked_share": r.parked_seconds / (workers * r.wall_seconds)}
                save(key)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
