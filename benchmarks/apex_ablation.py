"""What prioritization and n-step returns buy Ape-X DQN, over seeds: notebook 04's ablation
(section 8), which runs two of these arms for one seed, run here with all four for several.

Four arms on CartPole-v1, each with notebook 04's workers (2 x 4 envs, 64 env steps a call),
the same budget of env steps and its early stop at a greedy evaluation of 475 (20 episodes,
every 2,500 env steps): alpha = 0.6 or 0 (uniform), n = 3 or 1. Each run's evaluations are
kept, and per arm the benchmark counts the seeds that reached 475 within the budget. Notebook 04
reads ``benchmarks/results/apex_ablation.json``.

    python -m benchmarks.apex_ablation [--seeds 0,1,2,3,4] [--budget 12500]
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from benchmarks.common import benchmark_parser, table, write_result

#: The arms: overrides of ``ApexConfig``'s defaults, named as notebook 04 names them.
ARMS: dict[str, dict[str, Any]] = {
    "prioritized, 3-step": {}, "prioritized, 1-step": {"n_step": 1},
    "uniform, 3-step": {"alpha": 0.0}, "uniform, 1-step": {"alpha": 0.0, "n_step": 1}}
BUDGET = 12_500
TARGET = 475.0


def ablation_config(budget: int = BUDGET, seed: int = 0) -> Any:
    """Notebook 04's ``DQNConfig`` (2 workers x 4 envs, 64 env steps a call, an evaluation every
    2,500 env steps) with the ablation's budget: the config every arm trains with."""
    from rlkit.algos.dqn import DQNConfig

    return DQNConfig(seed=seed, total_steps=budget, eval_every=2_500, num_workers=2,
                     envs_per_worker=4, fragment_steps=64)


def summarize(runs: dict[str, dict[str, dict]]) -> dict[str, dict[str, Any]]:
    """Per arm, over its seeds: how many reached the target, the median env steps to reach it
    among those that did (``None`` if none did), and the median best greedy evaluation."""
    out = {}
    for arm, by_seed in runs.items():
        solved = [run["solved_at_steps"] for run in by_seed.values() if run["solved"]]
        out[arm] = {"solved": len(solved), "seeds": len(by_seed),
                    "median_steps_to_solve": statistics.median(solved) if solved else None,
                    "median_best_eval": statistics.median(
                        max(run["eval_returns"]) for run in by_seed.values())}
    return out


def readme_lines(data: dict) -> list[str]:
    """The README's table: per arm, the seeds that reached the target and the medians."""
    seeds = data["seeds"]
    out = [f"**What prioritization and n-step returns buy Ape-X DQN** (`python -m "
           f"benchmarks.apex_ablation`; CartPole-v1, at most {data['budget']:,} env steps per "
           f"run, stopping at a greedy evaluation of {data['target']:g}, seeds "
           f"{', '.join(map(str, seeds))}):", ""]
    out += table(("arm", f"reached {data['target']:g}", "median env steps to reach it",
                  "median best greedy evaluation"),
                 ((arm, f"{s['solved']}/{s['seeds']}",
                   "-" if s["median_steps_to_solve"] is None else f"{s['median_steps_to_solve']:,.0f}",
                   f"{s['median_best_eval']:.0f}") for arm, s in data["summary"].items()))
    return out + [""]


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2,3,4")
    parser.add_argument("--budget", type=int, default=BUDGET, help="env steps per run at most")
    args = parser.parse_args()
    import ray

    from rlkit.algos.apex import ApexConfig, ApexDQN
    from rlkit.core.common import config_dict
    from rlkit.distributed.apex.driver import train_apex_ray
    from rlkit.distributed.runtime.cluster import init_ray

    runs: dict[str, dict[str, dict]] = {arm: {} for arm in ARMS}
    init_ray()
    try:
        for seed in args.seeds:
            for arm, overrides in ARMS.items():
                config = ablation_config(args.budget, seed)
                r = train_apex_ray(ApexDQN(config, ApexConfig(**overrides)))
                runs[arm][str(seed)] = {
                    "solved": r.solved, "solved_at_steps": r.solved_at_steps,
                    "env_steps": r.env_steps, "wall_seconds": r.wall_seconds,
                    "eval_steps": r.history.eval_steps, "eval_returns": r.history.eval_returns}
                print(f"seed {seed} {arm:>20}: solved {r.solved} at {r.solved_at_steps}, best "
                      f"eval {max(r.history.eval_returns):.0f}", flush=True)
    finally:
        ray.shutdown()
    summary = summarize(runs)
    for arm, s in summary.items():
        print(f"{arm:>20}: {s}")
    write_result("apex_ablation", {
        "budget": args.budget, "target": TARGET, "seeds": args.seeds, "arms": ARMS,
        "summary": summary, "runs": runs, "config": config_dict(ablation_config(args.budget)),
        "apex_config": dataclasses.asdict(ApexConfig())})


if __name__ == "__main__":
    main()
