"""Time to solve, per seed: DQN on CartPole-v1 and SAC on Pendulum-v1, one process vs Ray.

Writes ``benchmarks/results/time_to_solve.json``. Each run stops at its first evaluation that
reaches the target (greedy eval >= 475 for DQN, deterministic eval >= -200 for SAC) or at the
step budget. "Steps/seconds to solve" are those of that evaluation, for both versions (the Ray
driver keeps its workers busy until the evaluation's answer arrives, so its run ends a little
later; that tail is recorded as ``env_steps``/``wall_seconds``). Seconds count from the end of
set-up for both; the Ray actors' start-up is recorded separately as ``startup_seconds``.

    python -m benchmarks.time_to_solve [--seeds 0,1,2,3,4] [--algos dqn,sac] [--workers 2]
"""

from __future__ import annotations

import dataclasses
import json

from benchmarks.common import benchmark_parser, solve_summary, write_result


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2,3,4")
    parser.add_argument("--algos", default="dqn,sac")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seeds = args.seeds

    import ray

    from rlkit.algos.dqn import DQNConfig
    from rlkit.algos.sac import SACConfig
    from rlkit.distributed.off_policy.driver import train_dqn_ray, train_sac_ray
    from rlkit.distributed.runtime.cluster import init_ray
    from rlkit.train import train_dqn, train_sac

    runs: dict[str, dict[str, dict]] = {}
    plans = {"dqn": (DQNConfig, train_dqn, train_dqn_ray),
             "sac": (SACConfig, train_sac, train_sac_ray)}
    init_ray()
    try:
        for algo in args.algos.split(","):
            config_cls, single, distributed = plans[algo]
            for mode in ("single", f"ray_{args.workers}_workers"):
                key = f"{algo}_{mode}"
                runs[key] = {}
                for seed in seeds:
                    config = config_cls(seed=seed)
                    if mode == "single":
                        r = single(config)
                        extra = {}
                    else:
                        r = distributed(dataclasses.replace(config, num_workers=args.workers))
                        extra = {"startup_seconds": r.startup_seconds, "device": r.device}
                    runs[key][str(seed)] = {"solved": r.solved, "eval_return": r.eval_return,
                                            "steps_to_solve": r.history.eval_steps[-1],
                                            "seconds_to_solve": r.history.eval_seconds[-1],
                                            "env_steps": r.env_steps,
                                            "wall_seconds": r.wall_seconds, **extra}
                    print(key, seed, runs[key][str(seed)], flush=True)
    finally:
        ray.shutdown()
    summary = solve_summary(runs)
    print(json.dumps(summary, indent=1))
    write_result("time_to_solve", {"summary": summary, "runs": runs})


if __name__ == "__main__":
    main()
