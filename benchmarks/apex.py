"""Ape-X under Ray: time to solve CartPole (DQN) and Pendulum (DDPG) per seed, and the sum
tree's throughput against a binary tree.

Writes ``benchmarks/results/apex.json``. Each seed trains with the defaults of ``ApexConfig``
and of the algorithm's config (the notebook's settings) and stops at its first evaluation that
reaches the target (CartPole: greedy mean >= 475 over 20 episodes; Pendulum: deterministic
mean >= -200 over 10); "seconds to solve" count from the end of set-up, evaluations included.
The sum tree figure is ``sample(256)`` + ``update_priorities(256)`` on 131,072 slots in this
process (target: >= 5,000 batches/s on the 2-core machine).

    python -m benchmarks.apex [--seeds 0,1,2] [--tree-seconds 3]
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time

import numpy as np

from benchmarks.common import benchmark_parser, write_result

TREE_SLOTS, TREE_BATCH = 131_072, 256
TREE_TARGET = 5_000  # batches/s on the 2-core machine (issue: Ape-X notebook)


def tree_batches_per_second(seconds: float, **tree_options: int) -> float:
    """Stratified ``sample(256)`` then ``update(256)`` with new random priorities, repeated for
    ``seconds`` on a full 131,072-slot :class:`PriorityTree`."""
    from rlkit.replay.sum_tree import PriorityTree

    rng = np.random.default_rng(0)
    tree = PriorityTree(TREE_SLOTS, **tree_options)
    tree.update(np.arange(TREE_SLOTS), rng.random(TREE_SLOTS))
    batches, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            slots = tree.stratified_sample(TREE_BATCH, rng)
            tree.update(slots, rng.random(TREE_BATCH))
        batches += 100
    return batches / (time.perf_counter() - start)


def summarize(runs: dict[str, dict]) -> dict:
    steps = [v["steps_to_solve"] for v in runs.values()]
    seconds = [v["seconds_to_solve"] for v in runs.values()]
    return {"solved": sum(v["solved"] for v in runs.values()), "seeds": len(runs),
            "median_steps_to_solve": statistics.median(steps),
            "range_steps_to_solve": [min(steps), max(steps)],
            "median_seconds_to_solve": statistics.median(seconds),
            "range_seconds_to_solve": [min(seconds), max(seconds)]}


def main() -> None:
    parser = benchmark_parser(__doc__, "0,1,2")
    parser.add_argument("--tree-seconds", type=float, default=3.0)
    args = parser.parse_args()
    seeds = args.seeds

    import ray

    from rlkit.algos.apex import ApexConfig, ApexDDPG, ApexDQN
    from rlkit.algos.ddpg import DDPGConfig
    from rlkit.algos.dqn import DQNConfig
    from rlkit.distributed.apex.driver import train_apex_ray
    from rlkit.distributed.runtime.cluster import init_ray

    tree = {"wide": tree_batches_per_second(args.tree_seconds),
            "binary": tree_batches_per_second(args.tree_seconds, fanout=2, top_size=1)}
    print("sum tree batches/s", tree, flush=True)
    apex = ApexConfig()  # 2 workers x 4 envs (the configs' shape below), 2 shards
    shape = dict(envs_per_worker=4, fragment_steps=64)
    configs = {"dqn": (ApexDQN, DQNConfig(total_steps=60_000, eval_every=2_500, **shape)),
               "ddpg": (ApexDDPG, DDPGConfig(total_steps=20_000, **shape))}
    results: dict[str, dict] = {}
    init_ray()
    try:
        cpus = ray.cluster_resources()["CPU"]
        for name, (spec, config) in configs.items():
            runs = {}
            for seed in seeds:
                r = train_apex_ray(spec(dataclasses.replace(config, seed=seed), apex))
                runs[str(seed)] = {
                    "solved": r.solved, "eval_return": r.eval_return,
                    # an unsolved run counts at its full budget (as time_to_solve does)
                    "steps_to_solve": r.solved_at_steps or r.env_steps,
                    "seconds_to_solve": r.solved_at_seconds or r.wall_seconds,
                    "updates": r.updates, "startup_seconds": r.startup_seconds}
                print(name, "seed", seed, runs[str(seed)], flush=True)
            results[name] = {"config": dataclasses.asdict(config), "runs": runs,
                             "summary": summarize(runs)}
    finally:
        ray.shutdown()
    summary = {"dqn": results["dqn"]["summary"], "ddpg": results["ddpg"]["summary"],
               "sumtree_batches_per_second": tree["wide"],
               "binary_tree_batches_per_second": tree["binary"],
               "sumtree_target_batches_per_second": TREE_TARGET,
               "sumtree_target_met": tree["wide"] >= TREE_TARGET, "cpus": cpus}
    print(json.dumps(summary, indent=1))
    write_result("apex", {"apex_config": dataclasses.asdict(apex), "summary": summary,
                          **results})


if __name__ == "__main__":
    main()
