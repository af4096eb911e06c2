"""The SAC learner on a GPU under Ray. Skipped where torch finds no CUDA (CI has none); on a
GPU machine these run in ``make test`` with their own cluster, which offers the GPU."""

import dataclasses
import time

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray")

from rlkit.algos.sac import SACConfig  # noqa: E402
from rlkit.core.common import updates_due  # noqa: E402
from rlkit.distributed.off_policy.driver import train_sac_ray  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.ray,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.fixture(scope="module")
def gpu_cluster():
    assert not ray.is_initialized()
    ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False,
             log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_sac_learner_runs_on_the_gpu_under_ray(gpu_cluster, cuda_graph):
    cfg = SACConfig(hidden=(64, 64), batch_size=64, learning_starts=300, total_steps=800,
                    eval_every=400, eval_episodes=2, target_return=None, cuda_graph=cuda_graph)
    result = train_sac_ray(cfg)  # learner_gpus=None: 1
    assert result.device.startswith("cuda")
    assert result.updates == updates_due(800, cfg.learning_starts, cfg.train_every)
    assert np.isfinite(result.history.losses).all()
    # the weights reach the workers as host numpy arrays, whatever the learner's device
    assert all(isinstance(v, np.ndarray) for v in result.weights.values())


def test_a_cpu_learner_can_be_forced_on_a_gpu_cluster(gpu_cluster):
    cfg = SACConfig(hidden=(32, 32), batch_size=32, learning_starts=300, total_steps=600,
                    eval_every=600, eval_episodes=1, target_return=None)
    assert train_sac_ray(dataclasses.replace(cfg, num_workers=1), learner_gpus=0).device == "cpu"


def test_a_killed_learner_actor_frees_its_gpu_memory(gpu_cluster):
    from rlkit.algos.sac import SACSpec
    from rlkit.distributed.off_policy.roles import OffPolicyLearner

    free_before, _ = torch.cuda.mem_get_info()
    cfg = SACConfig(hidden=(256, 256), batch_size=256, buffer_size=1_000_000)
    learner = ray.remote(OffPolicyLearner).options(num_cpus=1, num_gpus=1).remote(
        SACSpec(cfg), None, 10, "cuda")
    ray.get(learner.get_weights.remote())  # the actor is up, its buffer allocated on the GPU
    held = free_before - torch.cuda.mem_get_info()[0]
    assert held > 10 * 2**20  # the 1M-transition buffer alone is ~40 MB
    ray.kill(learner)
    for _ in range(100):  # the process exits, and the driver frees its GPU context
        if free_before - torch.cuda.mem_get_info()[0] < 0.1 * held:
            break
        time.sleep(0.1)
    assert free_before - torch.cuda.mem_get_info()[0] < 0.1 * held
