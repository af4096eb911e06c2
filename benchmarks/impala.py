"""IMPALA on CartPole-v1 under Ray: time to solve per seed, and learner consumption against the
single-process rollout ceiling.

Writes ``benchmarks/results/impala.json``. Each seed trains with the default ``IMPALAConfig``
(same settings for every seed) and stops at its first greedy evaluation (20 episodes) >= 475;
"seconds to solve" count from the end of the actors' start-up, evaluations included. The
throughput run trains for a fixed budget with no evaluation until its end (the driver always
evaluates the final weights; those seconds are left out), so the learner's consumption (env
steps per second) is measured alone; the ceiling is one actor's loop (same envs, same
network) in one process with no Ray and no learning.

    python -m benchmarks.impala [--seeds 0,1,2] [--throughput-steps 400000]
"""

from __future__ import annotations

import dataclasses
import json
import statistics

import numpy as np

from benchmarks.common import benchmark_parser, write_result


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2")
    parser.add_argument("--throughput-steps", type=int, default=400_000)
    parser.add_argument("--ceiling-seconds", type=float, default=3.0)
    args = parser.parse_args()
    seeds = args.seeds

    import ray

    from rlkit.algos.impala import IMPALAConfig
    from rlkit.distributed.impala.ceiling import rollout_ceiling
    from rlkit.distributed.impala.driver import train_impala_ray
    from rlkit.distributed.runtime.cluster import init_ray

    runs: dict[str, dict] = {}
    config = IMPALAConfig()
    init_ray()
    try:
        cpus = ray.cluster_resources()["CPU"]
        for seed in seeds:
            r = train_impala_ray(dataclasses.replace(config, seed=seed))
            runs[str(seed)] = {"solved": r.solved, "eval_return": r.eval_return,
                               "steps_to_solve": r.history.eval_steps[-1],
                               "seconds_to_solve": r.history.eval_seconds[-1],
                               "env_steps": r.env_steps, "wall_seconds": r.wall_seconds,
                               "startup_seconds": r.startup_seconds,
                               "policy_lag_mean": float(np.mean(r.policy_lags))}
            print("seed", seed, runs[str(seed)], flush=True)
        ceiling = rollout_ceiling(config, seconds=args.ceiling_seconds)
        flat_out = dataclasses.replace(config, target_return=None,
                                       total_steps=args.throughput_steps,
                                       eval_every=10 * args.throughput_steps)
        t = train_impala_ray(flat_out)
    finally:
        ray.shutdown()
    seconds = [v["seconds_to_solve"] for v in runs.values()]
    summary = {"solved": sum(v["solved"] for v in runs.values()), "seeds": len(runs),
               "median_seconds_to_solve": statistics.median(seconds),
               "range_seconds_to_solve": [min(seconds), max(seconds)],
               "median_steps_to_solve": statistics.median(v["steps_to_solve"]
                                                          for v in runs.values()),
               "ceiling_steps_per_second": ceiling,
               # the final evaluation's seconds taken out: throughput, not time to solve
               "learner_steps_per_second": t.consumption_steps_per_second,
               "efficiency_vs_ceiling": t.consumption_steps_per_second / ceiling,
               "throughput_policy_lag_mean": float(np.mean(t.policy_lags)),
               "cpus": cpus}
    print(json.dumps(summary, indent=1))
    write_result("impala", {"config": dataclasses.asdict(config), "summary": summary,
                            "runs": runs})


if __name__ == "__main__":
    main()
