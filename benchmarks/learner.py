"""Learner throughput: gradient updates per second of the DQN and SAC learners alone.

    python -m benchmarks.learner [--seconds 3]

CPU with 1, 2, 4 and all threads, and the GPU when one exists. The buffer lives on the
learner's device (SAC) or is a host numpy buffer (DQN). For SAC on one thread (and on the GPU)
three options are compared too: sampling from a host numpy buffer with a copy per batch,
``SACConfig.compile_losses`` (``torch.compile``; compilation happens before the clock starts),
and the critics left trainable during the actor step (what freezing them saves). On a GPU, SAC
is also measured with its whole update replayed as one CUDA graph (:mod:`rlkit.algos.sac_graph`),
alone and with compiled losses inside the graph. DQN has no compiled variant.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from benchmarks.common import save_plot, write_result


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
    write_result("learner", {"updates_per_second": results,
                             "seconds_per_measurement": args.seconds})
    fig, axes = plt.subplots(1, 2, figsize=(10, 3))
    for ax, (name, by_device) in zip(axes, results.items()):
        ax.barh(list(by_device), list(by_device.values()))
        ax.set_title(name); ax.set_xlabel("updates / s"); ax.grid(alpha=.3, axis="x")
        for label, v in by_device.items():
            print(f"{name:<26} {label:<40} {v:8.0f} updates/s")
    save_plot(fig, "learner")


if __name__ == "__main__":
    main()
