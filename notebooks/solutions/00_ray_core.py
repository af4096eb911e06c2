"""Solutions to notebook 00's coding exercises."""

import math

import ray


def in_order_of_completion(refs: list) -> list:
    """The results of ``refs`` in the order their tasks finish, not the order submitted."""
    results, pending = [], list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        results.append(ray.get(ready[0]))
    return results


def worker_cpus(num_workers: int, cluster_cpus: float) -> float:
    """Each rollout worker's CPU request: the learner takes 1 CPU (half the cluster below 2
    CPUs), the workers share the rest, at most 1 each, rounded down to Ray's 1e-4 steps."""
    learner = 1.0 if cluster_cpus >= 2 else cluster_cpus / 2
    share = min(1.0, (cluster_cpus - learner) / num_workers)
    return math.floor(share * 1e4) / 1e4
