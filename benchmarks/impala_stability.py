"""Why an IMPALA run on CartPole sometimes wanders for a million env steps: arms of settings,
over seeds, in one process (``train_impala`` with a simulated policy lag, reproducible).

Two measures per arm and seed:

* **to solve**: the run stops at its first greedy evaluation (20 episodes) at or above 475, as
  notebook 06's does; a run that never gets there within ``--budget`` env steps is *stuck*;
* **hold** (``--hold``): no early stop, ``--hold-budget`` env steps; the run's outcome is
  :func:`benchmarks.ppo_ablation.outcome`'s (*held* 475 from the first evaluation there,
  *reached* it and fell back, *never*), and the fraction of its second half's evaluations at or
  above 475.

Each arm changes one respect of notebook 06's config: a setting, or the env steps per update
(``batch_fragments * envs_per_worker * unroll_length``: B2 by the batch alone, N4-B2 by the
envs per worker and the batch together).

    python -m benchmarks.impala_stability [--seeds 0-11] [--arms notebook-06,B2,N4-B2] [--hold]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from benchmarks.common import write_result
from benchmarks.ppo_ablation import OUTCOMES, TARGET, outcome

#: Overrides of notebook 06's ``IMPALAConfig`` (queue_size keeps 2 updates' worth of fragments).
ARMS: dict[str, dict[str, Any]] = {
    "notebook-06": {},  # 4,096 env steps per update
    "lr-3e-4": {"learning_rate": 3e-4},
    "entropy-0": {"entropy_coef": 0.0},
    "B2": {"batch_fragments": 2, "queue_size": 4},  # 1,024 env steps per update
    "N4-B2": {"envs_per_worker": 4, "batch_fragments": 2, "queue_size": 4},  # 256 per update
}


def parse_seeds(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        seeds += list(range(int(low), int(high or low) + 1))
    return seeds


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-11")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--lag", type=int, default=1, help="simulated policy lag (updates)")
    parser.add_argument("--budget", type=int, default=1_000_000, help="env steps to solve in")
    parser.add_argument("--hold", action="store_true", help="also run without early stop")
    parser.add_argument("--hold-budget", type=int, default=600_000)
    args = parser.parse_args()
    import dataclasses

    from rlkit.algos.impala import IMPALAConfig
    from rlkit.core.common import config_dict
    from rlkit.train.impala import train_impala

    seeds, arms = parse_seeds(args.seeds), args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {unknown}; choose from {list(ARMS)}")
    solves: dict[str, dict[str, dict]] = {arm: {} for arm in arms}
    holds: dict[str, dict[str, dict]] = {arm: {} for arm in arms}
    for arm in arms:
        for seed in seeds:
            config = IMPALAConfig(seed=seed, total_steps=args.budget, **ARMS[arm])
            start = time.perf_counter()
            r = train_impala(config, policy_lag=args.lag)
            solves[arm][str(seed)] = {"solved": r.solved, "env_steps": r.env_steps,
                                      "eval_returns": r.history.eval_returns,
                                      "seconds": time.perf_counter() - start}
            print(f"{arm:>12} seed {seed}: solved={r.solved} at {r.env_steps:,} env steps",
                  flush=True)
            if args.hold:
                config = dataclasses.replace(config, total_steps=args.hold_budget,
                                             target_return=None)
                h = train_impala(config, policy_lag=args.lag).history
                holds[arm][str(seed)] = {
                    "outcome": outcome(h.eval_returns), "eval_steps": h.eval_steps,
                    "eval_returns": h.eval_returns,
                    "second_half_at_target": second_half_at_target(
                        h.eval_steps, h.eval_returns, args.hold_budget)}
    summary = {arm: summarize_solves(by_seed) for arm, by_seed in solves.items()}
    if args.hold:
        for arm, by_seed in holds.items():
            summary[arm]["hold"] = {o: sum(run["outcome"] == o for run in by_seed.values())
                                    for o in OUTCOMES}
    for arm, s in summary.items():
        print(f"{arm:>12}: solved {s['solved']}/{s['seeds']}, median {s['median_steps']}, "
              f"max {s['max_steps']}" + (f", hold {s['hold']}" if "hold" in s else ""))
    write_result("impala_stability", {
        "budget": args.budget, "hold_budget": args.hold_budget if args.hold else None,
        "lag": args.lag, "target": TARGET, "seeds": seeds,
        "arms": {arm: ARMS[arm] for arm in arms}, "summary": summary, "solves": solves,
        "holds": holds if args.hold else None, "config": config_dict(IMPALAConfig())})


if __name__ == "__main__":
    main()
