"""The rollout ceiling IMPALA's learner is held to: how many env steps per second one actor's
loop produces on one core, with no Ray and no learning (notebook 06, ``benchmarks/impala.py``)."""

from __future__ import annotations

import time

import numpy as np

from rlkit.algos.actor_critic import ActorCritic, sampling_policy
from rlkit.algos.impala import IMPALAConfig
from rlkit.core.common import worker_seed
from rlkit.envs.runner import EnvRunner


def rollout_ceiling(config: IMPALAConfig, seconds: float = 3.0) -> float:
    """Env steps per second of one actor's loop (``envs_per_worker`` envs, the same policy
    network sampling actions) in this process, no Ray, no learning: the rate one core can
    produce, which the learner's consumption is compared with."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runner = EnvRunner(config.env_id, worker_seed(config.seed, 0), "discrete", "IMPALA",
                           config.envs_per_worker, config.images)
        net = ActorCritic(runner.obs_spec, runner.action_dim, config.hidden,
                          config.shared_encoder)
        policy = sampling_policy(net, np.random.default_rng(config.seed))
        runner.run(config.unroll_length, policy, fixed_length=True)  # warm-up
        steps, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds:
            steps += runner.run(config.unroll_length, policy, fixed_length=True).num_steps
        runner.close()
        return steps / (time.perf_counter() - begin)
    finally:
        torch.set_num_threads(threads)
