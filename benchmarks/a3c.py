"""Time to solve CartPole-v1, per seed: A3C against A2C through the Ray gradient server.

Writes ``benchmarks/results/a3c.json``. Both drivers use the default ``A2CConfig`` and the same
number of workers; each run stops at its first greedy evaluation (20 episodes) with a mean of
at least 475, or at ``total_steps``. "Steps/seconds to solve" are those of that evaluation.
Seconds count from the moment all actors are up; their start-up is recorded separately as
``startup_seconds``. A3C runs are not bit-reproducible (gradient arrival order depends on
scheduling); A2C runs are.

Throughput, as for IMPALA: the rollout ceiling is one worker's loop (8 envs on the native vector
env, the policy sampling actions, no Ray, no gradients) in this process; the consumption is
the env steps per second of an A3C run with a fixed budget and no evaluation.

    python -m benchmarks.a3c [--seeds 0,1,2] [--workers 2] [--throughput-steps 100000]
"""

from __future__ import annotations

import json

import numpy as np

from benchmarks.common import benchmark_parser, solve_summary, write_result


def rollout_ceiling(config: object, seconds: float) -> float:
    """Env steps per second of one gradient worker's collect loop in this process."""
    import time

    import torch

    from rlkit.distributed.a3c.roles import GradientWorker

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        worker = GradientWorker(config, 0)
        worker.collect()  # warm-up
        steps, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds:
            steps += worker.collect().num_steps
        return steps / (time.perf_counter() - begin)
    finally:
        torch.set_num_threads(threads)


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--throughput-steps", type=int, default=100_000)
    parser.add_argument("--ceiling-seconds", type=float, default=3.0)
    args = parser.parse_args()
    seeds = args.seeds

    import ray

    from rlkit.algos.a2c import A2CConfig
    from rlkit.core.common import config_dict
    from rlkit.distributed.a3c.driver import train_a2c_ray, train_a3c_ray
    from rlkit.distributed.runtime.cluster import init_ray

    drivers = {"a3c": train_a3c_ray, "a2c": train_a2c_ray}
    runs: dict[str, dict[str, dict]] = {}
    init_ray()
    try:
        for name, driver in drivers.items():
            key = f"{name}_{args.workers}_workers"
            runs[key] = {}
            for seed in seeds:
                r = driver(A2CConfig(seed=seed, num_workers=args.workers))
                runs[key][str(seed)] = {
                    "solved": r.solved, "eval_return": r.eval_return,
                    "steps_to_solve": r.history.eval_steps[-1],
                    "seconds_to_solve": r.history.eval_seconds[-1],
                    "env_steps": r.env_steps, "wall_seconds": r.wall_seconds,
                    "startup_seconds": r.startup_seconds, "updates": r.updates,
                    "updates_per_second": r.updates_per_second,
                    "staleness_mean": float(np.mean(r.staleness)),
                    "skipped_updates": r.skipped_updates}
                print(key, seed, runs[key][str(seed)], flush=True)
        flat = train_a3c_ray(A2CConfig(num_workers=args.workers, eval_every=None,
                                       total_steps=args.throughput_steps))
        throughput = {"ceiling_steps_per_second": rollout_ceiling(A2CConfig(),
                                                                  args.ceiling_seconds),
                      "a3c_consumption_steps_per_second": flat.env_steps / flat.wall_seconds,
                      "throughput_steps": flat.env_steps}
        print(throughput, flush=True)
    finally:
        ray.shutdown()
    summary = solve_summary(runs)
    print(json.dumps({**summary, "throughput": throughput}, indent=1))
    write_result("a3c", {"summary": summary, "throughput": throughput, "runs": runs,
                         "config": config_dict(A2CConfig()), "workers": args.workers})


if __name__ == "__main__":
    main()
