"""Ape-X DQN on Breakout-MinAtar from its frames, on Ray, 1 worker against 2: frames per second
and frames and minutes to a greedy mean of 5 and 10, against the one-process DQN of
``benchmarks.pixels`` (notebook 09 draws both from their JSON).

The settings are the one-process run's, :data:`rlkit.algos.dqn.BREAKOUT_MINATAR` (3-step
returns, one update per 2 frames, the same network and target cadence), so the learner does the
same work per frame in both: Ape-X's rate limiter asks it for exactly the updates the frames
collected are owed (``updates_due``). What changes is who acts: 1 or 2 workers of 8 envs each
with Ape-X's epsilon ladder, fragments of 64 steps to one prioritized replay shard, a learner
actor, an evaluator. A greedy evaluation of 20 episodes every 10,000 frames. Writes
``benchmarks/results/pixels_apex.json`` after every run.

    python -m benchmarks.pixels_apex [--seeds 0] [--workers 1,2] [--total-steps 100000]
"""

from __future__ import annotations

import dataclasses
import time

from benchmarks.common import benchmark_parser, save_seed, seed_list
from benchmarks.pixels import run_record, summarize
from rlkit.algos.dqn import BREAKOUT_MINATAR
from rlkit.core.common import config_dict

#: Envs per worker and steps per fragment (a fragment is 512 frames).
ENVS_PER_WORKER, FRAGMENT_STEPS = 8, 64


def readme_lines(data: dict) -> list[str]:
    """The README's block for ``benchmarks/results/pixels_apex.json``."""
    m = data["machine"]
    lines = [f"**Ape-X DQN on Breakout-MinAtar from pixels** (`python -m benchmarks.pixels_apex`"
             f": {m['cpu']}, {m['logical_cores']} logical cores; the one-process run's "
             f"settings, one update per 2 frames; greedy mean of 20 episodes every 10,000 "
             f"frames)", "", "| workers | seed | frames | frames/s | updates/s | frames to 5 | "
             "minutes to 5 | best eval |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for key, r in data["runs"].items():
        workers, seed = key.split("/")
        five = r["reach"]["5"]
        frames = f"{five['frames']:,}" if five["frames"] else "-"
        minutes = f"{five['minutes']:.1f}" if five["frames"] else "-"
        lines.append(f"| {workers} | {seed} | {r['env_steps']:,} | {r['frames_per_second']:.0f} "
                     f"| {r['updates_per_second']:.0f} | {frames} | {minutes} | "
                     f"{max(r['eval_returns']):.1f} |")
    return lines + [""]


def main() -> None:
    parser = benchmark_parser(__doc__, "0", name="pixels_apex", total_steps=100_000)
    parser.add_argument("--workers", type=seed_list, default="1,2",
                        help="the worker counts to run, e.g. 1,2")
    args = parser.parse_args()

    import ray

    from rlkit.algos.apex import ApexConfig, ApexDQN
    from rlkit.distributed import init_ray, train_apex_ray

    init_ray()
    runs: dict = {}
    try:
        for workers in args.workers:
            for seed in args.seeds:
                config = dataclasses.replace(
                    BREAKOUT_MINATAR, seed=seed, total_steps=args.total_steps,
                    num_workers=workers, envs_per_worker=ENVS_PER_WORKER,
                    fragment_steps=FRAGMENT_STEPS)
                begin = time.perf_counter()
                r = train_apex_ray(ApexDQN(config, ApexConfig(num_shards=1)))
                key = f"{workers}/{seed}"
                runs[key] = {**run_record(r, r.updates, "cpu", begin), "workers": workers}
                save_seed(args.name, key, runs, summary={
                    str(w): summarize({k: v for k, v in runs.items() if v["workers"] == w},
                                      args.total_steps) for w in args.workers},
                    config=config_dict(config))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
