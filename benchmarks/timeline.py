"""What recording the role timeline costs a run: the same A3C run with and without it.

    python -m benchmarks.timeline [--pairs 3] [--steps 40000]

A3C is the pattern with the most driver events per second (a gradient from each worker every
few milliseconds, each one a call, an answer and a handled event), so the recording's cost shows
there first. Each pair runs ``timeline=True`` and ``timeline=False`` back to back on the same
Ray instance, alternating which goes first, with no evaluation and a fixed budget; the figure is
the median over pairs of the ratio of applied updates per second. The target (issue 41): under 1%.
"""

from __future__ import annotations

import argparse
import statistics

from benchmarks.common import write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40_000)
    args = parser.parse_args()

    import ray

    from rlkit.algos import A2CConfig
    from rlkit.distributed import init_ray, train_a3c_ray

    config = A2CConfig(num_workers=2, envs_per_worker=4, n_steps=8, total_steps=args.steps,
                       eval_every=None)
    init_ray()
    rows = []
    try:
        for pair in range(args.pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            rates = {}
            for recording in order:
                run = train_a3c_ray(config, timeline=recording)
                rates[recording] = run.updates_per_second
                spans = len(run.timeline)
                print(f"pair {pair}: timeline={recording}: {run.updates:,} updates, "
                      f"{run.updates_per_second:,.1f} updates/s, {spans:,} spans", flush=True)
            rows.append({"with": rates[True], "without": rates[False],
                         "ratio": rates[True] / rates[False]})
    finally:
        ray.shutdown()
    ratios = [r["ratio"] for r in rows]
    summary = {"median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
               "max_ratio": max(ratios), "pairs": len(rows)}
    print(summary)
    write_result("timeline", {"config": {"pattern": "A3C", "num_workers": 2, "envs_per_worker": 4,
                                         "n_steps": 8, "total_steps": args.steps},
                              "pairs": rows, "summary": summary})


if __name__ == "__main__":
    main()
