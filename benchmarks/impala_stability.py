"""Why an IMPALA run on CartPole sometimes wanders for a million env steps: arms of settings,
over seeds, in one process (``train_impala`` with a simulated policy lag, reproducible).

Two measures per arm and seed:

* **to solve**: the run stops at its first greedy evaluation (20 episodes) at or above 475, as
  notebook 06's does; a run that never gets there within ``--budget`` env steps is *stuck*;
* **hold** (``--hold``, written to ``impala_stability_hold.json`` instead): no early stop,
  ``--hold-budget`` env steps; the run's outcome is
  :func:`benchmarks.ppo_ablation.outcome`'s (*held* 475 from the first evaluation there,
  *reached* it and fell back, *never*), and the fraction of its second half's evaluations at or
  above 475, and how many runs fell below 250 (wandering) or below 50 (a collapsed policy:
  one action everywhere) in that half.

Each arm changes notebook 06's config (16 SGD steps of 256 env steps per update, learning rate
5e-4): ``lr-1e-3`` the learning rate alone; ``one-step`` the whole batch of 4,096 env steps in
one SGD step at 1e-3 (as IMPALA's paper does, and notebook 06's settings before
``minibatch_envs``); B2 and N4-B2 one SGD step at 1e-3 on smaller batches
(``batch_fragments * envs_per_worker * unroll_length`` = 1,024 and 256 env steps).

    python -m benchmarks.impala_stability [--seeds 0-47] [--arms notebook-06,one-step] [--hold]
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from benchmarks.common import benchmark_parser, write_result
from benchmarks.ppo_ablation import OUTCOMES, TARGET, outcome

#: Overrides of notebook 06's ``IMPALAConfig`` (queue_size keeps 2 updates' worth of fragments).
ARMS: dict[str, dict[str, Any]] = {
    # 4,096 env steps per update, in 16 SGD steps of 8 env columns (256), learning rate 5e-4
    "notebook-06": {},
    "lr-1e-3": {"learning_rate": 1e-3},  # the same, at the learning rate of one-step
    "one-step": {"minibatch_envs": 128, "learning_rate": 1e-3},  # one SGD step of 4,096
    "B2": {"batch_fragments": 2, "queue_size": 4, "minibatch_envs": 32,
           "learning_rate": 1e-3},  # one SGD step of 1,024
    "N4-B2": {"envs_per_worker": 4, "batch_fragments": 2, "queue_size": 4,
              "minibatch_envs": 8, "learning_rate": 1e-3},  # one SGD step of 256
}


def summarize_solves(runs: dict[str, dict]) -> dict[str, Any]:
    """Over one arm's seeds: how many solved within the budget, and the median and largest env
    steps to solve among those that did (``None`` when none did)."""
    steps = sorted(run["env_steps"] for run in runs.values() if run["solved"])
    return {"seeds": len(runs), "solved": len(steps),
            "median_steps": statistics.median(steps) if steps else None,
            "max_steps": steps[-1] if steps else None}


def second_half_at_target(eval_steps: list[int], eval_returns: list[float], budget: int,
                          target: float = TARGET) -> float | None:
    """Fraction of the evaluations after ``budget / 2`` env steps at or above ``target``."""
    late = [r for s, r in zip(eval_steps, eval_returns, strict=True) if s > budget / 2]
    return sum(r >= target for r in late) / len(late) if late else None


def solve_runs(arm: str, seeds: list[int], budget: int, lag: int) -> dict[str, dict]:
    """Per seed: the run stopped at its first greedy evaluation >= 475, or at ``budget``."""
    from rlkit.algos.impala import IMPALAConfig
    from rlkit.train.impala import train_impala

    runs = {}
    for seed in seeds:
        start = time.perf_counter()
        r = train_impala(IMPALAConfig(seed=seed, total_steps=budget, **ARMS[arm]),
                         policy_lag=lag)
        runs[str(seed)] = {"solved": r.solved, "env_steps": r.env_steps,
                           "eval_returns": r.history.eval_returns,
                           "seconds": time.perf_counter() - start}
        print(f"{arm:>12} seed {seed}: solved={r.solved} at {r.env_steps:,} env steps",
              flush=True)
    return runs


def hold_runs(arm: str, seeds: list[int], budget: int, lag: int) -> dict[str, dict]:
    """Per seed: a run with no early stop over ``budget`` env steps, its evaluations, outcome
    and the share of its second half's evaluations at >= 475."""
    from rlkit.algos.impala import IMPALAConfig
    from rlkit.train.impala import train_impala

    runs = {}
    for seed in seeds:
        config = IMPALAConfig(seed=seed, total_steps=budget, target_return=None, **ARMS[arm])
        h = train_impala(config, policy_lag=lag).history
        late = second_half_at_target(h.eval_steps, h.eval_returns, budget)
        runs[str(seed)] = {"outcome": outcome(h.eval_returns), "eval_steps": h.eval_steps,
                           "eval_returns": h.eval_returns, "second_half_at_target": late,
                           "second_half_lowest": min(
                               r for s, r in zip(h.eval_steps, h.eval_returns, strict=True)
                               if s > budget / 2)}
        print(f"{arm:>12} seed {seed}: {runs[str(seed)]['outcome']}, second half at 475: "
              f"{late:.2f}, lowest {runs[str(seed)]['second_half_lowest']:.0f}", flush=True)
    return runs


def main() -> None:
    parser = benchmark_parser(__doc__, "0-11")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--lag", type=int, default=1, help="simulated policy lag (updates)")
    parser.add_argument("--budget", type=int, default=1_000_000, help="env steps to solve in")
    parser.add_argument("--hold", action="store_true",
                        help="measure the hold instead (writes impala_stability_hold.json)")
    parser.add_argument("--hold-budget", type=int, default=600_000)
    args = parser.parse_args()
    from rlkit.algos.impala import IMPALAConfig
    from rlkit.core.common import config_dict

    seeds, arms = args.seeds, args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {unknown}; choose from {list(ARMS)}")
    common = {"lag": args.lag, "target": TARGET, "seeds": seeds,
              "arms": {arm: ARMS[arm] for arm in arms}, "config": config_dict(IMPALAConfig())}
    if args.hold:
        holds = {arm: hold_runs(arm, seeds, args.hold_budget, args.lag) for arm in arms}
        summary = {arm: {"seeds": len(by_seed),
                         **{o: sum(r["outcome"] == o for r in by_seed.values())
                            for o in OUTCOMES},
                         "mean_second_half_at_target": statistics.mean(
                             r["second_half_at_target"] for r in by_seed.values()),
                         "below_250_in_second_half": sum(
                             r["second_half_lowest"] < 250 for r in by_seed.values()),
                         "below_50_in_second_half": sum(
                             r["second_half_lowest"] < 50 for r in by_seed.values())}
                   for arm, by_seed in holds.items()}
        for arm, s in summary.items():
            print(f"{arm:>12}: {s}")
        write_result("impala_stability_hold", {"hold_budget": args.hold_budget, **common,
                                                "summary": summary, "holds": holds})
        return
    solves = {arm: solve_runs(arm, seeds, args.budget, args.lag) for arm in arms}
    summary = {arm: summarize_solves(by_seed) for arm, by_seed in solves.items()}
    for arm, s in summary.items():
        print(f"{arm:>12}: solved {s['solved']}/{s['seeds']}, median {s['median_steps']}, "
              f"max {s['max_steps']}")
    write_result("impala_stability", {"budget": args.budget, **common, "summary": summary,
                                      "solves": solves})


if __name__ == "__main__":
    main()
