"""Lever study: which DQN / SAC settings solve sooner, over seeds 0-4, one process.

    python -m benchmarks.levers [--algo dqn] [--seeds 0,1,2,3,4] [--variants a,b] [--append]

Each variant changes a few fields of the default config (the same change for every seed: no
per-seed tuning) and keeps the solving criterion (greedy eval over 20 episodes >= 475 for DQN,
deterministic eval over 10 episodes >= -200 for SAC). For each run it records the env steps and
seconds (from the end of set-up) of the first evaluation that solved, and the cost per env step.
Writes ``benchmarks/results/levers_<algo>.json`` and a figure; the notebooks' settings cells
link to them. Runs are sequential: on the 2-core machine one run uses one core.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from benchmarks.common import benchmark_parser, results_dir, save_plot, write_result

# name -> (description, overrides of the default config)
DQN_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "before": ("the settings before this study: 256x256, eval every 5k",
               {"hidden": (256, 256), "eval_every": 5_000, "n_step": 1}),
    "eval_2500": ("eval every 2.5k", {"hidden": (256, 256), "eval_every": 2_500, "n_step": 1}),
    "net_128": ("128x128, eval every 2.5k",
                {"hidden": (128, 128), "eval_every": 2_500, "n_step": 1}),
    "n3": ("3-step returns, 256x256, eval every 2.5k",
           {"hidden": (256, 256), "eval_every": 2_500, "n_step": 3}),
    "n3_net_128": ("3-step returns, 128x128, eval every 2.5k",
                   {"hidden": (128, 128), "eval_every": 2_500, "n_step": 3}),
    "n3_net_128_utd_1": ("3-step, 128x128, one update per env step",
                         {"hidden": (128, 128), "eval_every": 2_500, "n_step": 3,
                          "train_every": 1}),
    "n3_net_128_lr_1e-3": ("3-step, 128x128, learning rate 1e-3",
                           {"hidden": (128, 128), "eval_every": 2_500, "n_step": 3,
                            "learning_rate": 1e-3}),
    "n3_net_128_target_512": ("3-step, 128x128, target sync every 512 updates",
                              {"hidden": (128, 128), "eval_every": 2_500, "n_step": 3,
                               "target_update_every": 512}),
    "n3_net_64": ("3-step returns, 64x64, eval every 2.5k",
                  {"hidden": (64, 64), "eval_every": 2_500, "n_step": 3}),
}

SAC_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "before": ("the settings before this study: eval every 2k", {"eval_every": 2_000}),
    "eval_1000": ("eval every 1k", {"eval_every": 1_000}),
    "eval_1000_net_64": ("eval every 1k, 64x64", {"eval_every": 1_000, "hidden": (64, 64)}),
    "eval_1000_start_500": ("eval every 1k, 500 random steps",
                            {"eval_every": 1_000, "learning_starts": 500}),
    "eval_1000_batch_64": ("eval every 1k, batch 64",
                           {"eval_every": 1_000, "batch_size": 64}),
    "eval_1000_lr_3e-3": ("eval every 1k, all learning rates 3e-3",
                          {"eval_every": 1_000, "actor_lr": 3e-3, "critic_lr": 3e-3,
                           "alpha_lr": 3e-3}),
}


def run_one(algo: str, overrides: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train one seed with the overrides; the figures of its first solving evaluation."""
    if algo == "dqn":
        from rlkit.algos.dqn import DQNConfig as Config
        from rlkit.train import train_dqn as train
    else:
        from rlkit.algos.sac import SACConfig as Config
        from rlkit.train import train_sac as train
    result = train(Config(seed=seed, **overrides))
    h = result.history
    return {"solved": result.solved, "eval_return": result.eval_return,
            "steps_to_solve": h.eval_steps[-1] if result.solved else None,
            "seconds_to_solve": h.eval_seconds[-1] if result.solved else None,
            "env_steps": result.env_steps, "wall_seconds": result.wall_seconds,
            "evaluations": len(h.eval_steps),
            "ms_per_env_step": 1e3 * result.wall_seconds / result.env_steps}


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Median and range of steps and seconds to solve; an unsolved seed counts as failed."""
    solved = [r for r in runs.values() if r["solved"]]
    out: dict[str, Any] = {"solved": len(solved), "seeds": len(runs)}
    for key in ("steps_to_solve", "seconds_to_solve"):
        values = [r[key] for r in solved]
        if len(solved) == len(runs):
            out[f"median_{key}"] = statistics.median(values)
            out[f"max_{key}"] = max(values)
            out[f"min_{key}"] = min(values)
    out["ms_per_env_step"] = statistics.median(r["ms_per_env_step"] for r in runs.values())
    return out


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2,3,4")
    parser.add_argument("--algo", default="dqn", choices=("dqn", "sac"))
    parser.add_argument("--variants", default=None, help="comma-separated; default: all")
    parser.add_argument("--append", action="store_true",
                        help="keep the variants already in the results file")
    args = parser.parse_args()
    table = DQN_VARIANTS if args.algo == "dqn" else SAC_VARIANTS
    names = list(table) if args.variants is None else args.variants.split(",")
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {list(table)}")
    seeds = args.seeds
    path = results_dir() / f"levers_{args.algo}.json"
    variants: dict[str, Any] = {}
    if args.append and path.exists():
        variants = json.loads(path.read_text())["variants"]
    for name in names:
        description, overrides = table[name]
        runs = {}
        for seed in seeds:
            runs[str(seed)] = run_one(args.algo, overrides, seed)
            print(name, seed, runs[str(seed)], flush=True)
        variants[name] = {"description": description, "overrides": overrides,
                          "summary": summarise(runs), "runs": runs}
        print(name, variants[name]["summary"], flush=True)
        write_result(f"levers_{args.algo}", {"algo": args.algo, "variants": variants})
    plot(args.algo, variants)


def plot(algo: str, variants: dict[str, Any]) -> None:
    """Steps to solve per seed (dots) and their median (bar), one row per variant."""
    import matplotlib.pyplot as plt

    names = list(variants)
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.2))
    for i, name in enumerate(names):
        runs = variants[name]["runs"].values()
        steps = [r["steps_to_solve"] for r in runs if r["solved"]]
        failed = sum(not r["solved"] for r in runs)
        ax.scatter(steps, [i] * len(steps), color="C0", s=18, zorder=3)
        if steps and not failed:
            ax.barh(i, statistics.median(steps), color="C0", alpha=0.25)
        if failed:
            ax.annotate(f"{failed} unsolved", (0, i), xytext=(4, -3),
                        textcoords="offset points", color="C3", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("env steps to solve (dots: seeds; bar: median)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{algo.upper()} levers, one process, seeds 0-4")
    save_plot(fig, f"levers_{algo}")


if __name__ == "__main__":
    main()
