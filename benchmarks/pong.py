"""APPO on Atari Pong from pixels: frames and minutes to a greedy mean of 18, per seed.

The settings are :data:`rlkit.algos.ppo.PONG_APPO` (``Atari/Pong-v5``: ALE v5, 4 stacked 84x84
grey frames, the Nature conv net, shared by the policy and the value). Workers fill the machine
(its CPUs minus the learner's); the learner trains on the GPU when the machine has one
(``learner_gpus=1``), else on the CPU; a
greedy evaluation of 10 episodes every 200,000 agent steps; one agent step is 4 emulator
frames. Hours on a 2-core CPU: this is the run for a machine with many cores and a GPU.
``--minutes M`` stops a seed after M minutes of its run, as a Ctrl-C would (the run saves a
checkpoint then, and every 10 updates; the record is read from the last one, marked
``stopped_at_minutes``), so a lease of fixed length still returns its curve. Not part of
``make bench``. ``--seeds 0 --total-steps 2048 --eval-every 1024`` checks the harness: 143 s
on the 2-core VM (8,186 agent steps, 252 frames/s, an update every 26 s of the learner's time:
the conv learner on 2 CPU cores is the bottleneck). Writes ``benchmarks/results/pong.json``
(``--name``), after every seed.

    python -m benchmarks.pong [--seeds 0,1,2] [--workers N] [--total-steps N] [--minutes M]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time

from benchmarks.common import benchmark_parser, interrupt_after, save_seed, table
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
            "median_frames_per_second": statistics.median(rates) if (rates := [
                v["frames_per_second"] for v in runs.values()
                if v["frames_per_second"] is not None]) else None}


def training_means(h, every: int = 100_000) -> list[tuple[int, float]]:
    """``(step, mean return)`` of the training episodes that ended in each window of ``every``
    agent steps (``step``: the window's end): whether acting improved, whatever the greedy
    evaluations say."""
    windows: dict[int, list[float]] = {}
    for step, ret in zip(h.episode_steps, h.episode_returns):
        windows.setdefault(-(-step // every) * every, []).append(ret)
    return [(end, statistics.fmean(rets)) for end, rets in sorted(windows.items())]


def curve_record(h, env_steps: int, wall_seconds: float) -> dict:
    """The first evaluation at :data:`TARGET` in a history, the best, the frame rate, and the
    training episodes' mean return per 100,000 agent steps."""
    first = next((i for i, r in enumerate(h.eval_returns) if r >= TARGET), None)
    return {"training_means": training_means(h),
            "steps_to_target": h.eval_steps[first] if first is not None else None,
            "minutes_to_target": h.eval_seconds[first] / 60 if first is not None else None,
            "best_eval": max(h.eval_returns, default=None), "env_steps": env_steps,
            "frames_per_second": FRAMESKIP * env_steps / wall_seconds,
            "wall_seconds": wall_seconds, "eval_steps": h.eval_steps,
            "eval_returns": h.eval_returns}


def tenths(values: list[float]) -> list[float]:
    """The means of ``values`` in ten consecutive slices of (nearly) equal length (fewer if
    there are fewer than ten values): how a learner's metric moved over the run."""
    edges = [round(k * len(values) / 10) for k in range(11)]
    return [statistics.fmean(values[a:b]) for a, b in zip(edges, edges[1:]) if b > a]


def run_record(result) -> dict:
    """What one seed's finished run reports: its curve, its learner's rate and device, and
    each learner metric (PPO's entropy, approximate KL, clip fraction, ...) and the policy lag
    in tenths of the run: whether the policy collapsed, or moved at all."""
    return {**curve_record(result.history, result.env_steps, result.wall_seconds),
            "updates_per_second": result.updates / max(result.learner_busy_seconds, 1e-9),
            "learner_device": result.device,
            "learner_tenths": {key: tenths(values) for key, values in
                               {**result.diagnostics, "policy_lag": result.policy_lags}.items()}}


def stopped_record(checkpoint_dir: str, config, minutes: float) -> dict:
    """What a seed stopped by ``--minutes`` reports, read from the last checkpoint (the one its
    Ctrl-C wrote, or failing that the last periodic one): the history and counts up to then."""
    from rlkit.train.checkpoint import load_checkpoint

    try:
        saved = load_checkpoint(checkpoint_dir, config.algorithm, config)
    except FileNotFoundError as error:  # stopped before any checkpoint: nothing to report
        return {"stopped_at_minutes": minutes, "steps_to_target": None,
                "frames_per_second": None, "error": str(error)}
    return {**curve_record(saved.history, saved.env_steps, saved.wall_seconds),
            "stopped_at_minutes": minutes}


def readme_lines(data: dict) -> list[str]:
    """The README's block for a ``pong*.json``: per seed, frames/s, how far it got, and when it
    reached :data:`TARGET` (or that ``--minutes`` stopped it first)."""
    s, m = data["summary"], data["machine"]
    encoder = ("one conv net under the policy and the value" if data["config"].get(
        "shared_encoder") else "a conv net each for the policy and the value")
    lines = [f"**APPO on Atari Pong from pixels** (`python -m benchmarks.pong`: {m['cpu']}, "
             f"{m['logical_cores']} logical cores, GPU: {m.get('gpu') or 'none'}; "
             f"{s['workers']} workers; {encoder}; greedy mean of 10 episodes; target "
             f"{s['target']:g}; the "
             f"entropy of a uniform policy over Pong's 6 actions is 1.792)", ""]
    return lines + table(("seed", "learner", "agent steps", "emulator frames/s",
                          "best greedy eval", "training mean, first -> last 100k steps",
                          "entropy, first -> last tenth", "minutes to target", "stopped at"),
                         (pong_row(seed, r) for seed, r in data["runs"].items())) + [""]


def pong_row(seed: str, r: dict) -> tuple:
    """One seed's cells in :func:`readme_lines`' table."""
    if r.get("frames_per_second") is None:
        return (seed, r["learner_device"], "-", "-", "-", "-", "-", "-",
                f"{r['stopped_at_minutes']:.1f} min, before its first checkpoint")
    means, entropy = r.get("training_means"), r.get("learner_tenths", {}).get("entropy")
    return (seed, r["learner_device"], f"{r['env_steps']:,}", f"{r['frames_per_second']:,.0f}",
            f"{r['best_eval']:g}",
            f"{means[0][1]:.1f} -> {means[-1][1]:.1f}" if means else "-",
            f"{entropy[0]:.3f} -> {entropy[-1]:.3f}" if entropy else "-",
            f"{r['minutes_to_target']:.1f}" if r["minutes_to_target"] else "not reached",
            f"{r['stopped_at_minutes']:.1f} min (`--minutes`)" if "stopped_at_minutes" in r
            else "budget or target")


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2", name="pong", total_steps=PONG_APPO.total_steps,
                              workers_help="rollout workers (default: the cluster's CPUs minus "
                              "the learner's)")
    parser.add_argument("--eval-every", type=int, default=PONG_APPO.eval_every)
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop each seed after this many minutes (a Ctrl-C; see above)")
    args = parser.parse_args()

    import ray

    from rlkit.distributed import init_ray, train_appo_ray

    resources = init_ray()
    cpus, gpus = resources["CPU"], resources.get("GPU", 0)
    workers = args.workers or max(1, int(cpus) - 1)
    runs = {}
    try:
        for seed in args.seeds:
            config = dataclasses.replace(PONG_APPO, seed=seed, num_workers=workers,
                                         total_steps=args.total_steps,
                                         eval_every=args.eval_every, target_return=TARGET)
            begin = time.perf_counter()
            with tempfile.TemporaryDirectory() as folder:
                try:
                    interrupt_after(args.minutes)
                    result = train_appo_ray(config, progress=bool(os.isatty(1)),
                                            learner_gpus=1 if gpus >= 1 else 0,
                                            checkpoint_dir=folder, checkpoint_every=10)
                    record = run_record(result)
                except KeyboardInterrupt:
                    if args.minutes is None:
                        raise
                    record = {**stopped_record(folder, config, args.minutes),
                              "learner_device": "cuda" if gpus >= 1 else "cpu"}
                finally:
                    interrupt_after(0)  # (0 cancels a timer still running)
            runs[str(seed)] = {**record, "seconds_in_all": time.perf_counter() - begin}
            save_seed(args.name, seed, runs,
                      summary=summarize(runs, workers, cpus, args.total_steps),
                      config=config_dict(PONG_APPO))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
