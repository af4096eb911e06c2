"""DQN on Breakout-MinAtar from its frames, in one process: env frames and minutes to a greedy
mean of 5, 10 and 15, per seed (issue 40's benchmark; its first step: the one-process DQN, the
reference the distributed runs will be measured against).

The settings, the same for every seed, are :data:`rlkit.algos.dqn.BREAKOUT_MINATAR` (where they
come from is said there); a greedy evaluation of 20 episodes every 10,000 env steps (frames:
one env step is one frame here); a seed stops at its budget or at its first evaluation at 15,
the last threshold. Random play scores about 0.5. Writes ``benchmarks/results/<name>.json``
after every seed, so a long run keeps what it finished.

A seed of 1M frames takes hours on two cores. ``--minutes M`` stops each seed after M minutes
(a Ctrl-C: the run saves a checkpoint, and the record, marked ``stopped_at_minutes``, is read
from it); with ``--checkpoint-dir DIR`` the checkpoints, replay included, stay in DIR, and the
next invocation with the same DIR resumes each seed where it stopped (a resumed one-process run
equals an uninterrupted one), so a long budget can be run in pieces.

    python -m benchmarks.pixels [--seeds 0,1,2] [--total-steps 1000000] [--name pixels]
        [--minutes M] [--checkpoint-dir DIR]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import benchmark_parser, interrupt_after, save_seed, table
from rlkit.algos.dqn import BREAKOUT_MINATAR
from rlkit.core.common import config_dict

#: The greedy means whose first crossing is reported.
THRESHOLDS = (5, 10, 15)
#: Replays measured against the memory check's estimate: (name, capacity, frame space).
REPLAYS = (("Breakout-MinAtar, 1M transitions", 1_000_000, (0, 1, (4, 10, 10))),
           ("Atari, 4x84x84 stacks, 100k transitions", 100_000, (0, 255, (4, 84, 84))))


def replay_memory() -> dict[str, dict[str, float]]:
    """Per replay of :data:`REPLAYS`: the bytes the memory check estimates before allocating
    (``replay_bytes``) and the resident memory the process gained once every row was written
    (numpy's pages are only resident once written), and their ratio."""
    import gc

    import gymnasium as gym
    import numpy as np
    import psutil

    from rlkit.core.spaces import obs_spec
    from rlkit.replay.buffers import ReplayBuffer
    from rlkit.replay.memory import replay_bytes

    out = {}
    for name, capacity, (low, high, shape) in REPLAYS:
        spec = obs_spec(gym.spaces.Box(low, high, shape, np.uint8))
        gc.collect()
        before = psutil.Process().memory_info().rss
        buffer = ReplayBuffer(capacity, spec, None, seed=0)
        for field in buffer.fields:
            getattr(buffer, field)[:] = 1  # every page written, so resident
        gained = psutil.Process().memory_info().rss - before
        estimate = replay_bytes(capacity, spec, None)
        out[name] = {"estimate_bytes": estimate, "resident_bytes": gained,
                     "resident_over_estimate": gained / estimate}
        print(name, out[name], flush=True)
        del buffer
    return out


def first_reaching(eval_steps: list[int], eval_seconds: list[float], returns: list[float],
                   threshold: float) -> tuple[int | None, float | None]:
    """``(env steps, minutes)`` at the first evaluation whose mean reaches ``threshold``."""
    for step, seconds, mean in zip(eval_steps, eval_seconds, returns):
        if mean >= threshold:
            return step, seconds / 60
    return None, None


def reach_cells(reach: dict) -> tuple[str, str]:
    """A threshold's first crossing (``run_record``'s ``reach[t]``) as table cells: frames and
    minutes, or ``-`` twice if the run never reached it."""
    return (f"{reach['frames']:,}", f"{reach['minutes']:.1f}") if reach["frames"] else ("-", "-")


def readme_lines(data: dict) -> list[str]:
    """The README's block for ``benchmarks/results/pixels.json``."""
    s, m = data["summary"], data["machine"]
    lines = [f"**DQN on Breakout-MinAtar from pixels** (`python -m benchmarks.pixels`: one "
             f"process, {m['cpu']}, {m['logical_cores']} logical cores, GPU: "
             f"{m['gpu'] or 'none'}; greedy mean of 20 episodes every 10,000 frames; budget "
             f"{s['total_steps']:,} frames; random play 0.5)", ""]
    rows = []
    for seed, r in data["runs"].items():
        frames, minutes = zip(*(reach_cells(r["reach"][str(t)]) for t in THRESHOLDS))
        run = f"{r['env_steps']:,}" + (" (stopped)" if "stopped_at_minutes" in r else "")
        rows.append((seed, run, *frames, *minutes, f"{max(r['eval_returns']):.1f}",
                     f"{r['updates_per_second']:.0f}", f"{r['frames_per_second']:.0f}"))
    lines += table(("seed", "frames run", "frames to 5", "to 10", "to 15", "minutes to 5",
                    "to 10", "to 15", "best eval", "updates/s", "frames/s"), rows)
    for name, m in data.get("replay_memory", {}).items():
        lines += [""] if lines[-1] else []  # (a table ends at a blank line)
        lines.append(f"Replay of {name}: {m['estimate_bytes'] / 2**20:,.0f} MiB estimated by the "
                     f"memory check before allocating, {m['resident_bytes'] / 2**20:,.0f} MiB "
                     f"resident once filled ({m['resident_over_estimate']:.3f}x).")
    return lines + [""]


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2", name="pixels",
                              total_steps=BREAKOUT_MINATAR.total_steps)
    parser.add_argument("--minutes", type=float, default=None,
                        help="stop each seed after this many minutes of this invocation (a "
                        "Ctrl-C); its record is read from the checkpoint the Ctrl-C wrote")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="keep each seed's checkpoint, replay included, in DIR/seed<N>, and "
                        "resume the seed from it when there is one (default: a temporary "
                        "folder, gone after the seed)")
    args = parser.parse_args()

    memory, runs = replay_memory(), {}
    for seed in args.seeds:
        config = dataclasses.replace(BREAKOUT_MINATAR, seed=seed, total_steps=args.total_steps,
                                     target_return=max(THRESHOLDS))
        with tempfile.TemporaryDirectory() as temporary:
            folder = Path(args.checkpoint_dir or temporary) / f"seed{seed}"
            runs[str(seed)] = train_seed(config, folder, args.minutes)
        save_seed(args.name, seed, runs, summary=summarize(runs, args.total_steps),
                  config=config_dict(BREAKOUT_MINATAR), replay_memory=memory)


def train_seed(config, folder: Path, minutes: float | None) -> dict:
    """One seed's record: trained to ``config.total_steps`` or to the first evaluation at
    ``config.target_return``, from the checkpoint in ``folder`` if one is there; stopped after
    ``minutes`` if given (then read from the checkpoint its Ctrl-C wrote, and marked
    ``stopped_at_minutes``). Minutes in the record count every invocation's training time."""
    from rlkit.train import train_dqn
    from rlkit.train.checkpoint import checkpoint_file, load_checkpoint

    options = {"checkpoint_dir": folder, "checkpoint_buffer": True,
               "resume_from": folder if checkpoint_file(folder).is_file() else None}
    begin = time.perf_counter()
    try:
        interrupt_after(minutes)
        result = train_dqn(config, progress=bool(os.isatty(1)), **options)
        return run_record(result, result.learner.updates, "cpu", begin)
    except KeyboardInterrupt:
        if minutes is None:
            raise
        saved = load_checkpoint(folder, "DQN", config)
        return {**run_record(saved, saved.updates, "cpu", begin),
                "stopped_at_minutes": (time.perf_counter() - begin) / 60}  # (a Ctrl-C by hand too)
    finally:
        interrupt_after(0)  # (0 cancels a timer still running)


def run_record(result, updates: int, device: str, begin: float) -> dict:
    """One seed's record: the first evaluation reaching each of :data:`THRESHOLDS` (frames,
    minutes), the rates, the greedy curve; ``begin``: ``perf_counter()`` before the run."""
    h = result.history
    return {"reach": {str(t): dict(zip(("frames", "minutes"), first_reaching(
                h.eval_steps, h.eval_seconds, h.eval_returns, t))) for t in THRESHOLDS},
            "env_steps": result.env_steps, "wall_seconds": result.wall_seconds,
            "updates": updates, "updates_per_second": updates / result.wall_seconds,
            "frames_per_second": result.env_steps / result.wall_seconds, "device": device,
            "seconds_in_all": time.perf_counter() - begin, "eval_steps": h.eval_steps,
            "eval_seconds": h.eval_seconds, "eval_returns": h.eval_returns}


def summarize(runs: dict, total_steps: int) -> dict:
    """Per threshold: the seeds that reached it and the median frames and minutes over them."""
    summary: dict = {"seeds": len(runs), "total_steps": total_steps}
    for t in THRESHOLDS:
        reached = [r["reach"][str(t)] for r in runs.values() if r["reach"][str(t)]["frames"]]
        summary[str(t)] = {
            "reached": len(reached),
            "median_frames": statistics.median(x["frames"] for x in reached) if reached else None,
            "median_minutes": statistics.median(x["minutes"] for x in reached) if reached
            else None}
    return summary


if __name__ == "__main__":
    main()
