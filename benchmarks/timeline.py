"""What recording the role timeline costs a run: the same A3C run with and without it.

    python -m benchmarks.timeline [--pairs 3] [--steps 40000]

A3C is the pattern with the most driver events per second (a gradient from each worker every
few milliseconds, each one a call, an answer and a handled event), so the recording's cost shows
there first. Each pair runs ``timeline=True`` and ``timeline=False`` back to back on the same
Ray instance, alternating which goes first, with no evaluation and a fixed budget; the figure is
the median over pairs of the ratio of applied updates per second. The target (issue 41): under 1%.

Runs of a few seconds on a shared 2-core VM vary by several percent from one to the next, more
than the target, so the script also times the recording alone (a call launched and answered and
the driver's span, in a loop, in this process) and multiplies it by the spans each run recorded
per second: the share of the driver's time the recording takes, which the pairs bound from above.
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

    import itertools
    import time

    import ray

    from rlkit.core.timeline import TimelineRecorder

    from rlkit.algos import A2CConfig
    from rlkit.distributed import init_ray, train_a3c_ray

    config = A2CConfig(num_workers=2, envs_per_worker=4, n_steps=8, total_steps=args.steps,
                       eval_every=None)
    init_ray()
    rows = []
    try:
        for pair in range(args.pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            rates, spans_per_second = {}, 0.0
            for recording in order:
                run = train_a3c_ray(config, timeline=recording)
                rates[recording] = run.updates_per_second
                spans = len(run.timeline)
                spans_per_second = max(spans_per_second, spans / run.wall_seconds)
                print(f"pair {pair}: timeline={recording}: {run.updates:,} updates, "
                      f"{run.updates_per_second:,.1f} updates/s, {spans:,} spans", flush=True)
            rows.append({"with": rates[True], "without": rates[False],
                         "ratio": rates[True] / rates[False],
                         "spans_per_second": spans_per_second})
    finally:
        ray.shutdown()
    ticks = itertools.count()
    recorder, n = TimelineRecorder(lambda: next(ticks) * 1e-3), 100_000
    start = time.perf_counter()
    for ref in range(n):  # one event: a call launched and answered, and the driver's span
        recorder.launched(ref, "worker 0", "fragment")
        recorder.handled("fragment", recorder.answered(ref))
    per_span = (time.perf_counter() - start) / (2 * n)
    ratios = [r["ratio"] for r in rows]
    spans_per_second = statistics.median(r["spans_per_second"] for r in rows)
    summary = {"median_ratio": statistics.median(ratios), "min_ratio": min(ratios),
               "max_ratio": max(ratios), "pairs": len(rows),
               "seconds_per_span": per_span, "spans_per_second": spans_per_second,
               "recording_share_of_wall": per_span * spans_per_second}
    print(summary)
    write_result("timeline", {"config": {"pattern": "A3C", "num_workers": 2, "envs_per_worker": 4,
                                         "n_steps": 8, "total_steps": args.steps},
                              "pairs": rows, "summary": summary})


if __name__ == "__main__":
    main()
