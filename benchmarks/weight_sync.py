"""Weight sync: time to publish a new weights version and for a worker to fetch it.

    python -m benchmarks.weight_sync [--repeats 200]

Measured for the DQN Q-network and the SAC actor, on a local Ray instance, two ways:

* **as training pays it** (the target): *publish* is what :meth:`OffPolicyLearner.publish` costs
  the learner during training (``get_weights`` + sending the server the weights, without
  waiting for the answer); *fetch* is what :meth:`RolloutWorker.sync_weights` costs the
  worker at the start of a fragment when a new version is waiting (read the answer it asked for
  one fragment earlier, load the weights, send the next question). In a cluster started by
  :func:`rlkit.distributed.runtime.cluster.init_ray`, as here, weights up to 0.9 MiB travel by value
  inside the messages; larger ones are stored with ``ray.put`` and fetched by reference.
* **blocking latency**: the learner waits for the server to acknowledge, then the worker asks
  and waits (two extra actor round trips): how long until a worker that insists on the newest
  weights has them.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.common import write_result


class _Fetcher:
    """A stand-in rollout worker that only syncs weights (actor class for this benchmark)."""

    def __init__(self, spec, ps):
        from rlkit.distributed.off_policy.roles import RolloutWorker
        from rlkit.distributed.runtime.parameter_server import RayChannel

        self.ps = ps
        self.worker = RolloutWorker(spec, 0, RayChannel(ps))

    def prefetched_sync(self, version: int) -> float:
        """Seconds of the sync that loads ``version``, timed only once its answer is back (as
        it is in training, where a fragment's env steps hide the round trip)."""
        import ray

        while self.worker.version < version:
            if self.worker.weights.pending_poll is not None:
                ray.wait([self.worker.weights.pending_poll])  # untimed: overlaps acting
            start = time.perf_counter()
            self.worker.sync_weights()
            seconds = time.perf_counter() - start
        return seconds

    def blocking_sync(self) -> float:
        """Seconds to ask the server and load the answer, waiting for every reply."""
        import ray

        from rlkit.distributed.runtime.parameter_server import unpack_weights

        start = time.perf_counter()
        version, payload = ray.get(self.ps.get_if_newer.remote(-1))
        self.worker.set_weights(unpack_weights(payload), version)
        return time.perf_counter() - start


def _median_ms(values: list[float]) -> float:
    return 1e3 * statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    import ray

    from rlkit.algos.dqn import DQNConfig, DQNSpec
    from rlkit.algos.sac import SACConfig, SACSpec
    from rlkit.distributed.off_policy.roles import OffPolicyLearner
    from rlkit.distributed.runtime.cluster import init_ray
    from rlkit.distributed.runtime.parameter_server import ParameterServer, RayChannel

    init_ray()
    results = {}
    try:
        for name, spec in (("dqn q-network 256x256", DQNSpec(DQNConfig(hidden=(256, 256)))),
                           ("dqn q-network 128x128 (notebooks 01-02)", DQNSpec(DQNConfig())),
                           ("sac actor 256x256", SACSpec(SACConfig(hidden=(256, 256)))),
                           ("sac actor 128x128 (notebook 03)", SACSpec(SACConfig()))):
            ps = ray.remote(ParameterServer).options(num_cpus=0).remote()
            learner = OffPolicyLearner(spec, RayChannel(ps), device="cpu")
            fetcher = ray.remote(_Fetcher).options(num_cpus=0).remote(spec, ps)
            publish, fetch, blocking_publish, blocking_fetch = [], [], [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                learner.publish(wait=False)
                publish.append(time.perf_counter() - start)
                learner.weights.flush()  # untimed: in training the learner never waits for this
                version = ray.get(ps.get_version.remote())
                fetch.append(ray.get(fetcher.prefetched_sync.remote(version)))

                start = time.perf_counter()
                learner.publish(wait=True)
                blocking_publish.append(time.perf_counter() - start)
                blocking_fetch.append(ray.get(fetcher.blocking_sync.remote()))
            nbytes = sum(v.nbytes for v in learner.get_weights().values())
            results[name] = {
                "bytes": nbytes,
                "publish_ms_median": _median_ms(publish),
                "fetch_ms_median": _median_ms(fetch),
                "total_ms_median": _median_ms(publish) + _median_ms(fetch),
                "blocking_publish_ms_median": _median_ms(blocking_publish),
                "blocking_fetch_ms_median": _median_ms(blocking_fetch),
                "blocking_total_ms_median": (_median_ms(blocking_publish)
                                             + _median_ms(blocking_fetch)),
            }
            print(name, {k: round(v, 2) for k, v in results[name].items()})
            for handle in (fetcher, ps):
                ray.kill(handle)
    finally:
        ray.shutdown()
    write_result("weight_sync", {"repeats": args.repeats, "results": results})


if __name__ == "__main__":
    main()
