"""Rollout throughput against the machine's own ceiling (env steps per second, learner off).

    python -m benchmarks.rollout [--seconds 5] [--repeats 3]

Measures, in one run: the raw environment loop with random actions (one process); the same
8-env loop with the policy forward (a fresh process without Ray: the per-worker ceiling); the
naive per-step Ray design; the batched design with 1, 2, 4, ... workers up to the logical
cores. The efficiency of k workers is their rate / (k x the one-process env+policy rate). Then
one worker with 64 envs (CartPole's native gymnasium vector env steps them all in a few numpy
operations) against its own one-process loop, and its ratio to the naive design.

Where an efficiency below 1 comes from, measured in the same run for each k: the same loop in
``k`` plain processes at once (no Ray: what the cores themselves give, the machine's parallel
ceiling), and in ``k`` Ray actors at once with no Ray call while they step (what the actor
processes cost, before any transition or weight is sent). The one-process ceiling and every
k-worker figure are measured ``--repeats`` times, interleaved, each efficiency against the
ceiling measured just before it, and reported as the median and range: this shared virtual
machine's speed drifts by 10-20% between identical runs.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.common import save_plot, write_result

ENVS_PER_WORKER = 8
FRAGMENT_STEPS = 2000
#: Also measured: fragments this many times longer, which pay the fixed cost of a call
#: (the driver, the buffer actor, the parameter-server poll) less often per env step.
LARGE_FRAGMENT_FACTOR = 4


def loop_rate(seconds: float, envs: int = ENVS_PER_WORKER, barrier: Any = None) -> float:
    """Env steps per second of the rollout loop in this process (build, warm up, wait at
    ``barrier`` if given, then measure for ``seconds``)."""
    from rlkit.algos.dqn import DQNConfig
    from rlkit.distributed.off_policy.throughput import EPSILON, single_process_throughput

    return single_process_throughput(DQNConfig(), seconds, envs, EPSILON, barrier)


def _plain_child(seconds: float, barrier: Any, out: Any) -> None:
    out.put(loop_rate(seconds, barrier=barrier))


def plain_processes_rate(k: int, seconds: float) -> float:
    """Env steps per second of the loop in ``k`` plain processes at once (no Ray)."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(k), ctx.Queue()
    children = [ctx.Process(target=_plain_child, args=(seconds, barrier, out)) for _ in range(k)]
    for child in children:
        child.start()
    try:
        rates: list[float] = []
        deadline = time.perf_counter() + 120 + seconds
        while len(rates) < k:
            try:
                rates.append(out.get(timeout=1.0))
            except queue.Empty:
                failed = [c.exitcode for c in children if c.exitcode not in (None, 0)]
                if failed or time.perf_counter() > deadline:
                    raise RuntimeError(f"a plain rollout process failed (exit codes {failed}) "
                                       "or gave no rate within 120 s") from None
        return sum(rates)
    finally:
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()


class _LoopActor:
    """An actor that runs the rollout loop with no Ray call while it steps."""

    def run(self, seconds: float) -> float:
        return loop_rate(seconds)


def actors_rate(k: int, seconds: float, cpus: float) -> float:
    """Env steps per second of the loop in ``k`` Ray actors at once, no Ray call while stepping."""
    import ray

    actors = [ray.remote(_LoopActor).options(num_cpus=cpus).remote() for _ in range(k)]
    try:
        ray.get([a.run.remote(0.2) for a in actors], timeout=120)  # start, import, warm up
        return sum(ray.get([a.run.remote(seconds) for a in actors], timeout=120 + seconds))
    finally:
        for actor in actors:
            ray.kill(actor)


def _summary(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def raw_env_rate(seconds: float) -> float:
    from rlkit.envs.make import make_env

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


def plot(result: dict[str, Any]) -> None:
    """``benchmarks/results/rollout.png`` from the numbers :func:`main` writes."""
    import matplotlib.pyplot as plt

    from rlkit.notebook.plotting import legend_below

    ceiling, runs = result["single_process_env_plus_policy"], result["efficiency_runs"]
    ks = [int(k) for k in result["batched"]]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(ks, list(result["batched"].values()), "o-", label="batched Ray workers")
    for design, label in (("plain", "k plain processes, no Ray"),
                          ("actors", "k Ray actors, no calls")):
        ax.plot(ks, [runs[design][str(k)]["median"] * k * ceiling for k in ks], ".:",
                label=label)
    ax.plot(ks, [k * ceiling for k in ks], "k--", lw=1, label="ideal: k x one process")
    ax.axhline(result["naive_per_step_calls"], color="C3", label="naive, 1 worker")
    ax.set_xticks(ks)
    ax.set_xlabel("workers"); ax.set_ylabel("env steps / s"); ax.grid(alpha=.3)
    legend_below(ax)
    cores = result.get("machine", {}).get("logical_cores", os.cpu_count())
    ax.set_title(f"rollout throughput, {cores} logical cores (median of {result['repeats']})")
    save_plot(fig, "rollout")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import ray

    from rlkit.algos.dqn import DQNConfig
    from rlkit.distributed.off_policy.throughput import (batched_rollout_throughput,
                                                         naive_rollout_throughput,
                                                         single_process_throughput)
    from rlkit.distributed.runtime.cluster import init_ray
    from rlkit.distributed.runtime.placement import plan_resources

    config = DQNConfig()
    raw = raw_env_rate(args.seconds)
    wide_ceiling = single_process_throughput(config, args.seconds, envs_per_worker=64)
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, *[2**i for i in range(2, 8) if 2**i <= cores], cores})
    ceilings: list[float] = []
    runs: dict[str, dict[str, list[float]]] = {
        design: {str(k): [] for k in counts}
        for design in ("batched", "batched_large_fragments", "plain", "actors")}
    batched_rates: dict[str, list[float]] = {str(k): [] for k in counts}
    init_ray()
    try:
        naive = naive_rollout_throughput(config, args.seconds)
        for _ in range(args.repeats):
            # in a fresh process without Ray: this one is connected to Ray
            ceiling = plain_processes_rate(1, args.seconds)
            ceilings.append(ceiling)
            for k in counts:
                cpus = plan_resources(k, ray.cluster_resources()["CPU"]).worker_cpus
                rates = {"batched": batched_rollout_throughput(config, k, args.seconds,
                                                               FRAGMENT_STEPS, ENVS_PER_WORKER),
                         "batched_large_fragments": batched_rollout_throughput(
                             config, k, args.seconds, LARGE_FRAGMENT_FACTOR * FRAGMENT_STEPS,
                             ENVS_PER_WORKER),
                         "plain": ceiling if k == 1 else plain_processes_rate(k, args.seconds),
                         "actors": actors_rate(k, args.seconds, cpus)}
                batched_rates[str(k)].append(rates["batched"])
                for design, rate in rates.items():
                    runs[design][str(k)].append(rate / (k * ceiling))
                print(f"{k} workers: " + ", ".join(f"{d} {r:,.0f} steps/s ({r / (k * ceiling):.2f})"
                                                   for d, r in rates.items()), flush=True)
        wide = batched_rollout_throughput(config, 1, args.seconds, 8192, 64)
    finally:
        ray.shutdown()
    ceiling = statistics.median(ceilings)
    efficiency = {k: statistics.median(v) for k, v in runs["batched"].items()}
    batched = {k: statistics.median(v) for k, v in batched_rates.items()}  # measured rates
    result = {
        "seconds_per_measurement": args.seconds, "repeats": args.repeats,
        "raw_env_random_actions": raw,
        "single_process_env_plus_policy": ceiling, "single_process_runs": ceilings,
        "naive_per_step_calls": naive,
        "batched": batched, "efficiency": efficiency,
        "efficiency_runs": {d: {k: _summary(v) for k, v in by_k.items()}
                            for d, by_k in runs.items()},
        "single_process_64_envs": wide_ceiling, "batched_64_envs_1_worker": wide,
        "efficiency_64_envs": wide / wide_ceiling, "batched_64_envs_vs_naive": wide / naive,
        "batched_8_envs_vs_naive": batched["1"] / naive,
        "policy": f"DQN Q-network {config.hidden}, epsilon 0.1",
        "fragment_steps": FRAGMENT_STEPS,
        "large_fragment_steps": LARGE_FRAGMENT_FACTOR * FRAGMENT_STEPS,
        "notes": f"batched: {ENVS_PER_WORKER} envs per worker, {FRAGMENT_STEPS}-step fragments, "
                 "2 calls in flight per worker; batched_large_fragments: "
                 f"{LARGE_FRAGMENT_FACTOR * FRAGMENT_STEPS}-step fragments; 64 envs: "
                 "8192-step fragments. Efficiencies: "
                 "median over the repeats, each against the one-process loop measured just "
                 "before; plain = k plain processes running the loop at once (no Ray), "
                 "actors = k Ray actors running it with no Ray call while stepping"}
    write_result("rollout", result)
    for k in batched:
        print(f"{k} workers: batched {batched[k]:,.0f} steps/s, efficiency {efficiency[k]:.2f} "
              f"(plain processes {statistics.median(runs['plain'][k]):.2f}, actors without "
              f"calls {statistics.median(runs['actors'][k]):.2f})")
    print(f"1 worker, 64 envs: {wide:,.0f} steps/s = {wide / naive:.0f}x naive, "
          f"efficiency {wide / wide_ceiling:.2f}")
    plot(result)


if __name__ == "__main__":
    main()
