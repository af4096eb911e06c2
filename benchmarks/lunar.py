"""Distributed SAC on the seed's own task, LunarLanderContinuous-v3: env steps and minutes to
solve, per seed, with the Ray driver (``train_sac_ray``).

"Solved" is the first deterministic evaluation (10 episodes, every 5,000 env steps) whose mean
return reaches 200. The settings, the same for every seed, are
:data:`rlkit.algos.sac.LUNAR_LANDER` (where they come from is said there). Writes
``benchmarks/results/lunar.json``.

    python -m benchmarks.lunar [--seeds 0,1,2] [--workers N] [--total-steps 300000]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

from benchmarks.common import benchmark_parser, save_seed, table
from rlkit.algos.sac import LUNAR_LANDER
from rlkit.core.common import config_dict


def readme_lines(data: dict) -> list[str]:
    """The README's block for ``benchmarks/results/lunar.json``."""
    s, m = data["summary"], data["machine"]
    lines = [f"**SAC on LunarLanderContinuous-v3** (`python -m benchmarks.lunar`: the Ray driver, "
             f"{s['workers']} workers, {m['cpu']}, {m['logical_cores']} logical cores, GPU: "
             f"{m['gpu'] or 'none'}; solved = the first deterministic evaluation over 10 episodes "
             f"with a mean of at least 200; budget {s['total_steps']:,} env steps): solved in "
             f"{s['solved']} of {s['seeds']} seeds", ""]
    rows = [(seed, r["solved"], f"{r['steps_to_solve']:,}" if r["solved"] else "-",
             f"{r['minutes_to_solve']:.1f}" if r["solved"] else "-",
             f"{r['learner_updates_per_second']:.0f} ({r['device']})", f"{r['eval_return']:.0f}")
            for seed, r in data["runs"].items()]
    return lines + table(("seed", "solved", "env steps to solve", "minutes to solve",
                          "learner updates/s", "last eval"), rows) + [""]


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2", name="lunar", total_steps=LUNAR_LANDER.total_steps,
                              workers_help="rollout workers (default: the cluster's CPUs minus "
                              "the learner's, at least 2)")
    args = parser.parse_args()
    seeds = args.seeds

    import ray

    from rlkit.distributed.off_policy.driver import train_sac_ray
    from rlkit.distributed.runtime.cluster import init_ray

    cpus = init_ray()["CPU"]
    workers = args.workers or max(2, int(cpus) - 1)
    runs = {}
    try:
        for seed in seeds:
            config = dataclasses.replace(LUNAR_LANDER, seed=seed,
                                         total_steps=args.total_steps)
            begin = time.perf_counter()
            r = train_sac_ray(dataclasses.replace(config, num_workers=workers),
                              progress=bool(os.isatty(1)))
            history = r.history
            runs[str(seed)] = {
                "solved": r.solved, "eval_return": r.eval_return,
                "steps_to_solve": history.eval_steps[-1] if r.solved else None,
                "minutes_to_solve": history.eval_seconds[-1] / 60 if r.solved else None,
                "env_steps": r.env_steps, "wall_seconds": r.wall_seconds,
                "startup_seconds": r.startup_seconds, "updates": r.updates,
                "learner_updates_per_second": r.updates / max(r.learner_busy_seconds, 1e-9),
                "device": r.device, "seconds_in_all": time.perf_counter() - begin,
                "eval_steps": history.eval_steps, "eval_returns": history.eval_returns}
            save_seed(args.name, seed, runs,
                      summary=summarize(runs, workers, cpus, args.total_steps),
                      config=config_dict(LUNAR_LANDER))
    finally:
        ray.shutdown()


def summarize(runs: dict, workers: int, cpus: float, total_steps: int) -> dict:
    """Seeds run and solved, and the medians over the solved ones."""
    solved = [v for v in runs.values() if v["solved"]]
    return {"seeds": len(runs), "solved": len(solved), "workers": workers, "cpus": cpus,
            "total_steps": total_steps,
            "median_steps_to_solve": statistics.median(v["steps_to_solve"] for v in solved)
            if solved else None,
            "median_minutes_to_solve": statistics.median(v["minutes_to_solve"] for v in solved)
            if solved else None}


if __name__ == "__main__":
    main()
