"""Weight sync: time to publish a new weights version and for a worker to fetch it.

    python -m benchmarks.weight_sync [--repeats 200]

Publish = the learner's ``get_weights`` + ``ray.put`` + the parameter server call; fetch = a
worker's ``get_if_newer`` call + ``ray.get`` of the stored weights + loading them into its
network. Measured for the DQN Q-network and the SAC actor, on a local Ray instance.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks.common import write_result


class _Fetcher:
    """A stand-in rollout worker that only fetches weights (actor class for this benchmark)."""

    def __init__(self, spec, ps):
        from rlkit.actors import RolloutWorker

        self.worker = RolloutWorker(spec, 0, ps)

    def fetch(self) -> float:
        start = time.perf_counter()
        self.worker.sync_weights()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    import ray

    from rlkit.algorithms import DQNSpec, SACSpec
    from rlkit.dqn import DQNConfig
    from rlkit.envs import make_env
    from rlkit.parallel import init_ray
    from rlkit.parameter_server import ParameterServer
    from rlkit.sac import SACConfig

    init_ray()
    results = {}
    try:
        for name, spec in (("dqn q-network 256x256", DQNSpec(DQNConfig())),
                           ("sac actor 256x256", SACSpec(SACConfig(hidden=(256, 256)))),
                           ("sac actor 128x128 (notebook 03)", SACSpec(SACConfig()))):
            env = make_env(spec.config.env_id, 0, spec.action_kind, spec.name)
            learner = spec.make_learner(env, "cpu")
            ps = ray.remote(ParameterServer).options(num_cpus=0).remote()
            fetcher = ray.remote(_Fetcher).options(num_cpus=0).remote(spec, ps)
            publish, fetch = [], []
            for _ in range(args.repeats):
                start = time.perf_counter()
                weights = learner.get_weights()
                ray.get(ps.publish.remote([ray.put(weights)]))
                publish.append(time.perf_counter() - start)
                fetch.append(ray.get(fetcher.fetch.remote()))
            nbytes = sum(v.nbytes for v in learner.get_weights().values())
            results[name] = {"bytes": nbytes,
                             "publish_ms_median": 1e3 * statistics.median(publish),
                             "fetch_ms_median": 1e3 * statistics.median(fetch),
                             "total_ms_median": 1e3 * (statistics.median(publish)
                                                       + statistics.median(fetch))}
            print(name, results[name])
            for handle in (fetcher, ps):
                ray.kill(handle)
    finally:
        ray.shutdown()
    write_result("weight_sync", {"repeats": args.repeats, "results": results})


if __name__ == "__main__":
    main()
