"""The on-policy learners (IMPALA's V-trace, PPO's and APPO's) on a GPU: one update there
matches the same update on the CPU, and under Ray ``learner_gpus=1`` trains on the GPU while the
workers act on the CPU. Skipped where torch finds no CUDA (CI has none)."""

import dataclasses

import numpy as np
import pytest
import torch

from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.ppo import BREAKOUT_MINATAR, BREAKOUT_MINATAR_APPO
from rlkit.envs.runner import EnvRunner

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

ENV = "rlkit/BreakoutMinAtar-v0"  # (4, 10, 10) frames of 0s and 1s, 6 actions
SMALL = dict(envs_per_worker=4, unroll_length=16, minibatch_size=32)  # 4 minibatches an epoch
CONFIGS = {"IMPALA": IMPALAConfig(env_id=ENV, envs_per_worker=4, unroll_length=16,
                                  batch_fragments=2, minibatch_envs=4, hidden=(64,)),
           "PPO": dataclasses.replace(BREAKOUT_MINATAR, **SMALL),
           "APPO": dataclasses.replace(BREAKOUT_MINATAR_APPO, **SMALL)}


RNG = np.random.default_rng(0)


def uniform_policy(obs):  # the behaviour policy the fragments record: uniform over 6 actions
    return RNG.integers(0, 6, len(obs)), np.full(len(obs), np.log(1 / 6), np.float32)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_one_update_on_the_gpu_matches_the_cpu(name):
    config = CONFIGS[name]
    runner = EnvRunner(ENV, 0, "discrete", name, num_envs=config.envs_per_worker, images=True)
    fragments = [runner.run(config.unroll_length, uniform_policy, fixed_length=True)
                 for _ in range(config.batch_fragments)]
    assert fragments[0].obs.dtype == np.uint8  # frames travel as they are, never float32
    spec = runner.obs_spec
    cpu, gpu = (config.make_learner(spec, 6, device) for device in ("cpu", "cuda"))
    assert next(gpu.net.parameters()).is_cuda and not next(cpu.net.parameters()).is_cuda
    for key, value in gpu.get_weights().items():  # the same start: one seed, either device
        np.testing.assert_array_equal(value, cpu.get_weights()[key])
    on_cpu, on_gpu = cpu.update(fragments), gpu.update(fragments)
    for field in on_cpu._fields:
        assert getattr(on_gpu, field) == pytest.approx(getattr(on_cpu, field), rel=1e-3,
                                                       abs=1e-5), field
    after = gpu.get_weights()  # weights travel as host numpy arrays, whatever the device
    assert all(isinstance(v, np.ndarray) for v in after.values())
    for key, value in cpu.get_weights().items():
        np.testing.assert_allclose(after[key], value, rtol=1e-3, atol=1e-4, err_msg=key)


@pytest.mark.ray
def test_appo_trains_on_the_gpu_under_ray():
    ray = pytest.importorskip("ray")
    from rlkit.distributed.impala.driver import train_appo_ray

    assert not ray.is_initialized()
    ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False,
             log_to_driver=False)
    try:
        config = dataclasses.replace(BREAKOUT_MINATAR_APPO, total_steps=8_192, eval_every=8_192,
                                     eval_episodes=2)
        result = train_appo_ray(config, learner_gpus=1)
        assert result.device.startswith("cuda")
        assert result.updates >= 1 and np.isfinite(result.history.losses).all()
        assert all(isinstance(v, np.ndarray) for v in result.weights.values())
        assert train_appo_ray(dataclasses.replace(config, total_steps=2_048)).device == "cpu"
    finally:
        ray.shutdown()
