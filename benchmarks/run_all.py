"""`make bench`: run every benchmark script, then re-render the README's results block.

    python -m benchmarks.run_all [--quick]

Full: about 25 minutes on a 2-core CPU (five seeds per algorithm for time-to-solve), plus
`benchmarks.lunar`, SAC on LunarLanderContinuous for 3 seeds, which takes tens of minutes a seed
on 2 cores (its JSON records each run's minutes), and `benchmarks.pixels`, DQN on
Breakout-MinAtar's frames for 3 seeds of 1M frames, which takes over an hour a seed on 2 cores
(about 220 frames a second measured, under load), and `benchmarks.pixels_apex`, the same DQN in
one process and as Ape-X with 1 and 2 workers, 60,000 frames each (about 4 minutes a run). The
lever study, `python -m benchmarks.levers`, is run on its own: about 30 minutes per algorithm,
and so is `benchmarks.pong` (APPO on Atari Pong to a score of 18: hours on 2 cores; the run for
a machine with many cores and a GPU).
``--quick``: shorter measurement windows and one SAC seed for time-to-solve, about 3 minutes,
plus a 12,000-step LunarLander run (26 s measured) and 10,000-frame Breakout runs;
for checking that the harness works, not for quoting numbers. It writes to
``benchmarks/results/quick/`` (not committed), so it never replaces the full run's figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        steps = [["benchmarks.rollout", "--seconds", "1", "--repeats", "1"],
                 ["benchmarks.learner", "--seconds", "1"],
                 ["benchmarks.weight_sync", "--repeats", "50"],
                 ["benchmarks.time_to_solve", "--algos", "sac", "--seeds", "0"],
                 ["benchmarks.a3c", "--seeds", "0"],
                 ["benchmarks.impala", "--seeds", "0", "--throughput-steps", "100000"],
                 ["benchmarks.apex", "--seeds", "0", "--tree-seconds", "1"],
                 ["benchmarks.apex_ablation", "--seeds", "0", "--budget", "5000"],
                 ["benchmarks.ppo", "--seeds", "0", "--ray-seeds", "0", "--pendulum-seeds", "0"],
                 ["benchmarks.ppo_ablation", "--seeds", "0", "--budget", "10000"],
                 ["benchmarks.lunar", "--seeds", "0", "--total-steps", "12000"],
                 ["benchmarks.pixels", "--seeds", "0", "--total-steps", "10000"],
                 ["benchmarks.pixels_apex", "--workers", "1", "--total-steps", "10000"],
                 ["benchmarks.timeline", "--pairs", "1", "--steps", "5000"],
                 ["benchmarks.dashboard", "--pairs", "1", "--idle-seconds", "5"]]
    else:
        steps = [["benchmarks.rollout"], ["benchmarks.learner"], ["benchmarks.weight_sync"],
                 ["benchmarks.time_to_solve"], ["benchmarks.a3c"], ["benchmarks.impala"],
                 ["benchmarks.apex"], ["benchmarks.apex_ablation"], ["benchmarks.ppo"], ["benchmarks.ppo_ablation"],
                 ["benchmarks.lunar"], ["benchmarks.pixels"], ["benchmarks.pixels_apex"],
                 ["benchmarks.timeline"],
                 ["benchmarks.dashboard"], ["benchmarks.render_readme"]]
    env = dict(os.environ)
    if args.quick:
        from benchmarks.common import QUICK_RESULTS

        env["RLKIT_BENCH_RESULTS"] = str(QUICK_RESULTS)
    total = time.perf_counter()
    for command in steps:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", *command], check=True, env=env)
        print(f"== {command[0]} took {time.perf_counter() - start:.0f} s", flush=True)
    print(f"== make bench{' --quick' if args.quick else ''} took "
          f"{time.perf_counter() - total:.0f} s in all")


if __name__ == "__main__":
    main()
