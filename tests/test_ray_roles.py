"""The same roles under a real local Ray cluster (2 CPUs, no dashboard), and the driver."""

import dataclasses
import time

import numpy as np
import pytest

from conftest import check_timeline, our_ray_processes, wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.dqn import DQNConfig, DQNSpec  # noqa: E402
from rlkit.core.common import eval_seed, updates_due  # noqa: E402
from rlkit.distributed.off_policy.driver import train_dqn_ray  # noqa: E402
from rlkit.distributed.off_policy.roles import OffPolicyLearner, RolloutWorker  # noqa: E402
from rlkit.distributed.runtime.evaluator import Evaluator  # noqa: E402
from rlkit.distributed.runtime.parameter_server import ParameterServer, RayChannel  # noqa: E402

pytestmark = pytest.mark.ray

CFG = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=500, total_steps=3000,
                eval_every=1000, eval_episodes=2, target_return=None)


def test_roles_as_ray_actors(ray_cluster):
    ps = ray.remote(ParameterServer).options(num_cpus=0).remote()
    learner = ray.remote(OffPolicyLearner).options(num_cpus=1).remote(DQNSpec(CFG),
                                                                   RayChannel(ps), 5, "cpu")
    worker = ray.remote(RolloutWorker).options(num_cpus=0.5).remote(DQNSpec(CFG), 0,
                                                                    RayChannel(ps))
    try:
        ray.get(learner.publish.remote())
        assert ray.get(ps.get_version.remote()) == 1
        batch_ref, stats_ref = worker.collect.options(num_returns=2).remote(300, 1.0)
        stats = ray.get(stats_ref)
        assert stats.env_steps == 300 and stats.weights_version == 1
        # the batch reference goes straight to the learner; the driver never fetches it
        metrics = ray.get(learner.add_and_train.remote(batch_ref, 10))
        assert metrics.updates == 10 and metrics.buffer_size == 300
        assert ray.get(ps.get_version.remote()) == 3  # 1 + publications after updates 5, 10
        # the worker asks "anything newer?" one fragment ahead: the question it sent during the
        # first collect (when version 1 was the newest) is answered "no", so this fragment
        # still acts with version 1, and the next one with version 3
        _, stats_ref = worker.collect.options(num_returns=2).remote(5, 0.0)
        assert ray.get(stats_ref).weights_version == 1
        # the answer to the next question ("yes, version 3") is picked up by a later fragment,
        # usually the very next one (in training a fragment's env steps give it time to arrive)
        deadline = time.monotonic() + 30
        while True:
            _, stats_ref = worker.collect.options(num_returns=2).remote(5, 0.0)
            if ray.get(stats_ref).weights_version == 3:
                break
            assert time.monotonic() < deadline, "the worker never picked up version 3"
            time.sleep(0.1)
        # 32x32 weights are small, so they travel by value inside the messages
        version, payload = ray.get(ps.get_if_newer.remote(0))
        assert isinstance(payload, dict)
        assert all(isinstance(v, np.ndarray) for v in payload.values())
    finally:
        for a in (ps, learner, worker):
            ray.kill(a)


def test_large_weights_travel_as_one_stored_object_small_ones_by_value(ray_cluster):
    from rlkit.distributed.runtime.parameter_server import (inline_weights_bytes, pack_weights,
                                                            unpack_weights)

    limit = inline_weights_bytes()  # 92 KB under Ray's default limit, which this fixture keeps
    large = {"w": np.arange(limit // 4 + 1, dtype=np.float32)}  # just over the limit
    packed = pack_weights(large)
    assert isinstance(packed, list) and isinstance(packed[0], ray.ObjectRef)
    np.testing.assert_array_equal(unpack_weights(packed, 30)["w"], large["w"])
    small = {"w": np.arange(limit // 4, dtype=np.float32)}  # exactly at the limit
    assert pack_weights(small) is small and unpack_weights(small) is small


@pytest.mark.smoke  # the fast tier's one Ray run: every role started, trained, stopped
def test_train_dqn_ray_short_run_holds_the_update_ratio(ray_cluster):
    result = train_dqn_ray(CFG)
    assert result.env_steps == 3000
    assert result.updates == updates_due(3000, CFG.learning_starts, CFG.train_every)
    assert len(result.history.episode_returns) > 10
    assert result.history.eval_steps and result.history.eval_steps[-1] == 3000
    assert np.isfinite(result.history.losses).all() and result.worker_restarts == 0
    check_timeline(result, {"worker 0", "worker 1", "learner", "evaluator"})


def test_a_solved_run_returns_the_weights_that_reached_the_target(ray_cluster):
    # any policy scores >= 1 on CartPole: the first evaluation (at 1000 env steps) solves it,
    # while the learner goes on training until the evaluator's answer is back
    cfg = dataclasses.replace(CFG, target_return=1.0, eval_episodes=5)
    result = train_dqn_ray(cfg)
    assert result.solved and result.history.eval_steps == [1000]
    # fragments usually arrive (and train the learner further) while the evaluation runs: the
    # final weights then differ from the scored ones (with the old code this test failed)
    scored = Evaluator(DQNSpec(cfg)).evaluate(result.weights, cfg.eval_episodes,
                                              eval_seed(cfg.seed, 0, cfg.eval_episodes))
    assert float(np.mean(scored)) == result.eval_return  # the same snapshot, the same episodes


def test_killed_worker_is_restarted_and_training_goes_on(ray_cluster):
    result = train_dqn_ray(CFG, kill_at={"worker 0": 1000})
    assert result.worker_restarts == 1
    assert any("worker 0 failed" in e and "restarted" in e for e in result.history.events)
    assert result.env_steps == 3000  # the lost fragment was collected again
    assert result.transitions_stored == 3000  # ... and stored once, the lost one never
    assert result.updates == updates_due(3000, CFG.learning_starts, CFG.train_every)


def test_train_sac_ray_short_run_on_cpu(ray_cluster):
    from rlkit.algos.sac import SACConfig
    from rlkit.distributed.off_policy.driver import train_sac_ray

    cfg = SACConfig(hidden=(32, 32), batch_size=32, learning_starts=300, total_steps=800,
                    eval_every=400, eval_episodes=2, target_return=None)
    result = train_sac_ray(cfg)
    assert result.device == "cpu"  # this cluster has no GPU, so the learner did not ask for one
    assert result.env_steps == 800
    assert result.updates == updates_due(800, cfg.learning_starts, cfg.train_every) == 500
    # Pendulum episodes are 200 steps; the 8 fragments of 100 steps go to whichever worker is
    # free, so an even split between the two workers gives 4 whole episodes and an odd one 3
    assert len(result.history.episode_returns) in (3, 4)
    assert np.isfinite(result.history.losses).all() and result.history.eval_steps[-1] == 800
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in result.weights.values())


def test_asking_for_a_gpu_the_cluster_lacks_fails_up_front(ray_cluster):
    from rlkit.algos.sac import SACConfig
    from rlkit.distributed.off_policy.driver import train_sac_ray

    assert ray.cluster_resources().get("GPU", 0) == 0  # the fixture pins a GPU-less cluster
    with pytest.raises(ValueError, match="learner_gpus=1 but no node has that many GPUs"):
        train_sac_ray(SACConfig(), learner_gpus=1)


def test_driver_leaves_no_actor_behind(ray_cluster):
    train_dqn_ray(dataclasses.replace(CFG, total_steps=1000, num_workers=1))
    assert wait_until_no_actors() == []


def test_zz_no_ray_process_left_after_shutdown(ray_cluster):
    ray.shutdown()
    for _ in range(50):
        left = our_ray_processes()
        if not left:
            break
        time.sleep(0.2)
    assert left == [], f"Ray processes still running after ray.shutdown(): {left}"
