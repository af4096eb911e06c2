"""What PPO's epochs and clip buy, over seeds: notebook 08's ablation (section 5), which runs
one seed, run here for several.

Three arms on CartPole-v1, each with the same budget of env steps and no early stop: PPO as
notebook 08 trains it (10 epochs, clip 0.2), one epoch, and ten epochs without the clip. Each
run's greedy evaluations (20 episodes, every 5,000 env steps) are kept, and its outcome: it
*held* 475 (every evaluation from the first at or above 475 stayed there), *reached* 475 and
fell back, or *never* reached it. Notebook 08 reads the counts from
``benchmarks/results/ppo_ablation.json``. One process, one torch thread.

    python -m benchmarks.ppo_ablation [--seeds 0,1,2,3,4] [--budget 40000]
"""

from __future__ import annotations

import dataclasses
import time

from benchmarks.common import benchmark_parser, table, write_result

#: The arms: overrides of notebook 08's ``PPOConfig``.
ARMS = {"10 epochs, clip 0.2 (PPO)": {}, "1 epoch, clip 0.2": {"epochs": 1},
        "10 epochs, no clip": {"clip": 1e6}}
TARGET = 475.0
OUTCOMES = ("held", "reached", "never")


def outcome(eval_returns: list[float], target: float = TARGET) -> str:
    """``"held"``: every evaluation from the first at or above ``target`` stayed there;
    ``"reached"``: one got there and a later one fell below; ``"never"``: none got there."""
    first = next((i for i, value in enumerate(eval_returns) if value >= target), None)
    if first is None:
        return "never"
    return "held" if all(value >= target for value in eval_returns[first:]) else "reached"


def summarize(runs: dict[str, dict[str, dict]]) -> dict[str, dict[str, int]]:
    """Per arm, how many seeds ended in each outcome."""
    return {arm: {o: sum(run["outcome"] == o for run in by_seed.values()) for o in OUTCOMES}
            for arm, by_seed in runs.items()}


def readme_lines(data: dict) -> list[str]:
    """The README's table: per arm, how many seeds held, reached or never reached the target."""
    seeds, s = len(data["seeds"]), data["seeds"]
    seed_text = f"{s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else ", ".join(map(str, s))
    out = [f"**What PPO's epochs and clip buy** (`python -m benchmarks.ppo_ablation`; CartPole-v1, "
           f"{data['budget']:,} env steps per run with no early stop, seeds {seed_text}; *held* = every greedy evaluation from the "
           f"first at {data['target']:g} stayed there, *reached* = one got there and a later one "
           f"fell back):", ""]
    out += table(("arm", "held", "reached, then fell back", "never reached"),
                 ((arm, f"{c['held']}/{seeds}", f"{c['reached']}/{seeds}", f"{c['never']}/{seeds}")
                  for arm, c in data["summary"].items()))
    return out + [""]


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2,3,4")
    parser.add_argument("--budget", type=int, default=40_000, help="env steps per run")
    args = parser.parse_args()
    import numpy as np

    from rlkit.algos.ppo import PPOConfig
    from rlkit.core.common import config_dict
    from rlkit.train.ppo import train_ppo

    seeds = args.seeds
    runs: dict[str, dict[str, dict]] = {arm: {} for arm in ARMS}
    for seed in seeds:
        for arm, overrides in ARMS.items():
            config = dataclasses.replace(PPOConfig(seed=seed), total_steps=args.budget,
                                         target_return=None, **overrides)
            start = time.perf_counter()
            r = train_ppo(config)
            runs[arm][str(seed)] = {
                "outcome": outcome(r.history.eval_returns),
                "eval_steps": r.history.eval_steps, "eval_returns": r.history.eval_returns,
                "kl_per_batch": float(np.mean(r.diagnostics["approx_kl"])),
                "seconds": time.perf_counter() - start}
            print(f"seed {seed} {arm:>27}: {runs[arm][str(seed)]['outcome']:>7}, last eval "
                  f"{r.eval_return:.0f}", flush=True)
    summary = summarize(runs)
    for arm, counts in summary.items():
        print(f"{arm:>27}: " + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES))
    write_result("ppo_ablation", {"budget": args.budget, "target": TARGET, "seeds": seeds,
                                  "arms": ARMS, "summary": summary, "runs": runs,
                                  "config": config_dict(PPOConfig())})


if __name__ == "__main__":
    main()
