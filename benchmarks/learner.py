"""Learner throughput: gradient updates per second of the DQN and SAC learners alone.

    python -m benchmarks.learner [--seconds 3]

CPU with 1, 2, 4 and all threads, and the GPU when one exists. The buffer lives on the
learner's device (SAC) or is a host numpy buffer (DQN). For SAC on one thread (and on the GPU)
three options are compared too: sampling from a host numpy buffer with a copy per batch,
``SACConfig.compile_losses`` (``torch.compile``; compilation happens before the clock starts),
and the critics left trainable during the actor step (what freezing them saves). On a GPU, SAC
is also measured with its whole update replayed as one CUDA graph (:mod:`rlkit.algos.sac_graph`),
alone and with compiled losses inside the graph. DQN has no compiled variant.

The on-policy family's conv learner is measured too, where ale-py is installed: one APPO update
of :data:`rlkit.algos.ppo.PONG_APPO` (2 fragments of 128 steps x 8 envs of 4x84x84 uint8 Pong
frames, 4 epochs of 8 minibatches, the Nature conv net), reported as agent steps (stacked
observations) learned per second, on every core of the CPU and on the GPU (the batch copied
there each update, as uint8); one thread is left out (about 29 s an update on the 2-core VM).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from benchmarks.common import save_plot, table, write_result


def dqn_updates_per_second(seconds: float, threads: int, device: str = "cpu") -> float:
    from rlkit.algos.dqn import DQNConfig, DQNLearner
    from rlkit.core.types import Batch
    from rlkit.replay.buffers import ReplayBuffer

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        config = DQNConfig(hidden=(256, 256))  # the size the results label names
        learner = DQNLearner(4, 2, config, device)
        buffer = ReplayBuffer(100_000, 4)
        rng = np.random.default_rng(0)
        n = 100_000
        buffer.add_batch(Batch(rng.normal(size=(n, 4)).astype(np.float32),
                               rng.integers(0, 2, n), np.ones(n, np.float32),
                               rng.normal(size=(n, 4)).astype(np.float32),
                               np.zeros(n, np.float32)))

        def sync() -> None:  # count queued GPU work before reading the clock
            if learner.device.type == "cuda":
                torch.cuda.synchronize(learner.device)

        for _ in range(20):
            learner.update(buffer.sample(config.batch_size))
        sync()
        updates, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(10):
                learner.update(buffer.sample(config.batch_size))
            updates += 10
            sync()
        return updates / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)


def appo_pong_steps_per_second(seconds: float, threads: int, device: str = "cpu") -> float:
    """Agent steps of :data:`~rlkit.algos.ppo.PONG_APPO` batches learned per second (at least one
    update, after one unclocked update; the clock stops after a device synchronisation)."""
    from rlkit.algos.ppo import PONG_APPO
    from rlkit.envs.runner import EnvRunner

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        config = PONG_APPO
        runner = EnvRunner(config.env_id, 0, "discrete", "APPO", config.envs_per_worker, True)
        n = runner.env.action_space.n
        rng = np.random.default_rng(0)

        def uniform(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return rng.integers(0, n, len(obs)), np.full(len(obs), -np.log(n), np.float32)

        batch = [runner.run(config.unroll_length, uniform, fixed_length=True)
                 for _ in range(config.batch_fragments)]
        runner.close()
        learner = config.make_learner(runner.obs_spec, n, device)

        def sync() -> None:
            if learner.device.type == "cuda":
                torch.cuda.synchronize(learner.device)

        learner.update(batch)
        sync()
        updates, start = 0, time.perf_counter()
        while updates == 0 or time.perf_counter() - start < seconds:
            learner.update(batch)
            updates += 1
            sync()
        return updates * config.steps_per_batch / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()

    import matplotlib.pyplot as plt

    from rlkit.distributed.off_policy.throughput import sac_learner_updates_per_second

    cores = os.cpu_count() or 1
    results: dict[str, dict[str, float]] = {"dqn (256x256, batch 64)": {},
                                            "sac (256x256, batch 256)": {}}
    for threads in sorted({1, 2, 4, cores}):
        label = "cpu, 1 thread" if threads == 1 else f"cpu, {threads} threads"
        results["dqn (256x256, batch 64)"][label] = dqn_updates_per_second(args.seconds, threads)
        results["sac (256x256, batch 256)"][label] = sac_learner_updates_per_second(
            "cpu", args.seconds, threads=threads)
    devices = [("cpu, 1 thread", "cpu")]
    if torch.cuda.is_available():
        label = f"cuda ({torch.cuda.get_device_name()})"
        devices.append((label, "cuda"))
        results["dqn (256x256, batch 64)"][label] = dqn_updates_per_second(args.seconds, 1, "cuda")
        sac = results["sac (256x256, batch 256)"]
        sac[label] = sac_learner_updates_per_second("cuda", args.seconds)
        sac[f"{label}, CUDA graph"] = sac_learner_updates_per_second(
            "cuda", args.seconds, cuda_graph=True)
        sac[f"{label}, CUDA graph + compiled losses"] = sac_learner_updates_per_second(
            "cuda", args.seconds, cuda_graph=True, compile_losses=True)
    for label, device in devices:
        sac = results["sac (256x256, batch 256)"]
        sac[f"{label}, host numpy buffer"] = sac_learner_updates_per_second(
            device, args.seconds, host_buffer=True)
        sac[f"{label}, compiled losses"] = sac_learner_updates_per_second(
            device, args.seconds, compile_losses=True)
        sac[f"{label}, critics not frozen in the actor step"] = sac_learner_updates_per_second(
            device, args.seconds, freeze_critics=False)
    pong = appo_pong_steps(args.seconds, cores)
    write_result("learner", {"updates_per_second": results,
                             "seconds_per_measurement": args.seconds,
                             "appo_pong_steps_per_second": pong})
    panels = [(name, by_device, "updates / s") for name, by_device in results.items()]
    if pong:
        panels.append(("appo on pong frames (nature cnn)", pong, "agent steps learned / s"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3))
    for ax, (name, by_device, unit) in zip(axes, panels):
        ax.barh(list(by_device), list(by_device.values()))
        ax.set_title(name); ax.set_xlabel(unit); ax.grid(alpha=.3, axis="x")
        for label, v in by_device.items():
            print(f"{name:<26} {label:<40} {v:8.0f} {unit}")
    save_plot(fig, "learner")


def appo_pong_steps(seconds: float, cores: int) -> dict[str, float]:
    """:func:`appo_pong_steps_per_second` on every core and on the GPU; empty where ale-py
    (the optional ``atari`` extra) is not installed."""
    try:
        import ale_py  # noqa: F401
    except ImportError:
        print("ale-py is not installed: the APPO Pong learner is not measured")
        return {}
    steps = {f"cpu, {cores} threads": appo_pong_steps_per_second(seconds, cores)}
    if torch.cuda.is_available():
        label = f"cuda ({torch.cuda.get_device_name()})"
        steps[label] = appo_pong_steps_per_second(seconds, 1, "cuda")
    return steps


def readme_lines(data: dict) -> list[str]:
    """The README's block for a ``learner*.json``: updates/s per learner and device, and the APPO
    Pong learner's agent steps/s where it was measured, with the machine they ran on."""
    m = data["machine"]
    lines = [f"**Learner alone** (`python -m benchmarks.learner`: {m['cpu']}, "
             f"{m['logical_cores']} logical cores, GPU: {m.get('gpu') or 'none'}):", ""]
    from rlkit.algos.ppo import PONG_APPO

    batch = PONG_APPO.steps_per_batch  # agent steps in one update
    rows = [(name, dev, f"{v:,.0f}")
            for name, by in data["updates_per_second"].items() for dev, v in by.items()]
    rows += [(f"appo on pong frames (nature cnn, batch {batch:,})", dev,
              f"{v / batch:,.2f} ({v:,.0f} agent steps learned/s)")
             for dev, v in data.get("appo_pong_steps_per_second", {}).items()]
    return lines + table(("learner", "device", "updates/s"), rows) + [""]


if __name__ == "__main__":
    main()
