"""Rollout throughput against the machine's own ceiling (env steps per second, learner off).

    python -m benchmarks.rollout [--seconds 5]

Measures, in one run: the raw environment loop with random actions (one process); the same
8-env loop with the policy forward (one process: the per-worker ceiling); the naive per-step
Ray design; the batched design with 1, 2, 4, ... workers up to the logical cores. The
efficiency of k workers is their rate / (k x the one-process env+policy rate). Then one worker
with 64 envs (CartPole's native gymnasium vector env steps them all in a few numpy operations)
against its own one-process loop, and its ratio to the naive design.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.common import save_plot, write_result


def raw_env_rate(seconds: float) -> float:
    from rlkit.envs import make_env

    env = make_env("CartPole-v1", 0)
    rng = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
            if terminated or truncated:
                env.reset()
        steps += 1000
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    import matplotlib.pyplot as plt
    import ray

    from rlkit.algos.dqn import DQNConfig
    from rlkit.distributed.cluster import init_ray
    from rlkit.distributed.throughput import (batched_rollout_throughput,
                                              naive_rollout_throughput,
                                              single_process_throughput)

    config = DQNConfig()
    raw = raw_env_rate(args.seconds)
    ceiling = single_process_throughput(config, args.seconds)
    wide_ceiling = single_process_throughput(config, args.seconds, envs_per_worker=64)
    init_ray()
    try:
        naive = naive_rollout_throughput(config, args.seconds)
        cores = os.cpu_count() or 1
        counts = sorted({1, 2, *[2**i for i in range(2, 8) if 2**i <= cores], cores})
        batched = {str(k): batched_rollout_throughput(config, k, args.seconds, 2000, 8)
                   for k in counts}
        wide = batched_rollout_throughput(config, 1, args.seconds, 8192, 64)
    finally:
        ray.shutdown()
    efficiency = {k: v / (int(k) * ceiling) for k, v in batched.items()}
    write_result("rollout", {
        "seconds_per_measurement": args.seconds, "raw_env_random_actions": raw,
        "single_process_env_plus_policy": ceiling, "naive_per_step_calls": naive,
        "batched": batched, "efficiency": efficiency,
        "single_process_64_envs": wide_ceiling, "batched_64_envs_1_worker": wide,
        "efficiency_64_envs": wide / wide_ceiling, "batched_64_envs_vs_naive": wide / naive,
        "batched_8_envs_vs_naive": batched["1"] / naive,
        "policy": f"DQN Q-network {config.hidden}, epsilon 0.1",
        "notes": "batched: 8 envs per worker, 2000-step fragments, 2 calls in flight per worker; "
                 "64 envs: 8192-step fragments"})
    for k in batched:
        print(f"{k} workers: {batched[k]:,.0f} steps/s, efficiency {efficiency[k]:.2f}")
    print(f"1 worker, 64 envs: {wide:,.0f} steps/s = {wide / naive:.0f}x naive, "
          f"efficiency {wide / wide_ceiling:.2f}")
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ks = [int(k) for k in batched]
    ax.plot(ks, list(batched.values()), "o-", label="batched Ray workers")
    ax.plot(ks, [k * ceiling for k in ks], "k--", lw=1, label="ideal: k x one process")
    ax.axhline(naive, color="C3", label="naive, 1 worker")
    ax.set_xticks(ks)
    ax.set_xlabel("workers"); ax.set_ylabel("env steps / s"); ax.grid(alpha=.3); ax.legend()
    ax.set_title(f"rollout throughput, {cores} logical cores")
    save_plot(fig, "rollout")


if __name__ == "__main__":
    main()
