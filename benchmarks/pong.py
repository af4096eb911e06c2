"""APPO on Atari Pong from pixels: frames and minutes to a greedy mean of 18, per seed.

The settings are :data:`rlkit.algos.ppo.PONG_APPO` (``Atari/Pong-v5``: ALE v5, 4 stacked 84x84
grey frames, the Nature conv net). Workers fill the machine (its CPUs minus the learner's); a
greedy evaluation of 10 episodes every 200,000 agent steps; one agent step is 4 emulator
frames. Hours on a 2-core CPU: this is the run for a machine with many cores, and it states
where its learner ran (the IMPALA/APPO learner trains on the CPU here, GPU or not). Not part of
``make bench``. ``--seeds 0 --total-steps 2048 --eval-every 1024`` checks the harness: 143 s
on the 2-core VM (8,186 agent steps, 252 frames/s, an update every 26 s of the learner's time:
the conv learner on 2 CPU cores is the bottleneck). Writes ``benchmarks/results/pong.json``
(``--name``), after every seed.

    python -m benchmarks.pong [--seeds 0,1,2] [--workers N] [--total-steps 10000000]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time

from benchmarks.common import benchmark_parser, save_seed
from rlkit.algos.ppo import PONG_APPO
from rlkit.core.common import config_dict

#: Emulator frames per agent step (ALE v5's frameskip).
FRAMESKIP = 4
#: The score to reach.
TARGET = 18.0


def summarize(runs: dict, workers: int, cpus: float, total_steps: int) -> dict:
    """Seeds run and reaching :data:`TARGET`, and the medians over those that did."""
    reached = [v for v in runs.values() if v["steps_to_target"] is not None]
    return {"seeds": len(runs), "reached": len(reached), "workers": workers, "cpus": cpus,
            "total_steps": total_steps, "target": TARGET,
            "median_frames_to_target": statistics.median(
                FRAMESKIP * v["steps_to_target"] for v in reached) if reached else None,
            "median_minutes_to_target": statistics.median(
                v["minutes_to_target"] for v in reached) if reached else None,
            "median_frames_per_second": statistics.median(
                v["frames_per_second"] for v in runs.values()) if runs else None}


def run_record(result, learner_device: str) -> dict:
    """What one seed's run reports: the first evaluation at :data:`TARGET`, its rates."""
    h = result.history
    first = next((i for i, r in enumerate(h.eval_returns) if r >= TARGET), None)
    return {"steps_to_target": h.eval_steps[first] if first is not None else None,
            "minutes_to_target": h.eval_seconds[first] / 60 if first is not None else None,
            "best_eval": max(h.eval_returns, default=None), "env_steps": result.env_steps,
            "frames_per_second": FRAMESKIP * result.env_steps / result.wall_seconds,
            "updates_per_second": result.updates / max(result.learner_busy_seconds, 1e-9),
            "wall_seconds": result.wall_seconds, "learner_device": learner_device,
            "eval_steps": h.eval_steps, "eval_returns": h.eval_returns}


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2")
    parser.add_argument("--workers", type=int, default=None,
                        help="rollout workers (default: the cluster's CPUs minus the learner's)")
    parser.add_argument("--total-steps", type=int, default=PONG_APPO.total_steps)
    parser.add_argument("--eval-every", type=int, default=PONG_APPO.eval_every)
    parser.add_argument("--name", default="pong", help="results/<name>.json")
    args = parser.parse_args()

    import ray

    from rlkit.distributed import init_ray, train_appo_ray

    cpus = init_ray()["CPU"]
    workers = args.workers or max(1, int(cpus) - 1)
    runs = {}
    try:
        for seed in args.seeds:
            config = dataclasses.replace(PONG_APPO, seed=seed, num_workers=workers,
                                         total_steps=args.total_steps,
                                         eval_every=args.eval_every, target_return=TARGET)
            begin = time.perf_counter()
            result = train_appo_ray(config, progress=bool(os.isatty(1)))
            # the IMPALA/APPO learner has no GPU path: it trains on the CPU on any machine
            runs[str(seed)] = {**run_record(result, "cpu"),
                               "seconds_in_all": time.perf_counter() - begin}
            save_seed(args.name, seed, runs,
                      summary=summarize(runs, workers, cpus, args.total_steps),
                      config=config_dict(PONG_APPO))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
