"""PPO and APPO under Ray, on IMPALA's roles and driver: a synchronous run has no policy lag and
solves, an asynchronous one measures its lag, a learner group trains APPO, a killed worker is
replaced, and the wrong config is refused before any actor starts."""

import dataclasses

import pytest

from conftest import wait_until_no_actors
from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.ppo import PPOConfig
from rlkit.distributed.impala.driver import train_appo_ray, train_ppo_ray

PPO = PPOConfig(eval_episodes=10)
APPO = dataclasses.replace(PPO, synchronous=False, use_vtrace=True)


def test_the_wrong_driver_or_config_is_refused_before_anything_starts():
    with pytest.raises(ValueError, match=r"synchronous.*train_appo_ray"):
        train_ppo_ray(APPO)
    with pytest.raises(ValueError, match=r"synchronous.*train_ppo_ray"):
        train_appo_ray(PPO)
    with pytest.raises(TypeError, match="PPOConfig"):
        train_ppo_ray(IMPALAConfig())
    with pytest.raises(TypeError, match="num_lerners.*num_learners"):
        train_appo_ray(APPO, num_lerners=2)
    with pytest.raises(ValueError, match=r"learner_gpus=-1.*>= 0"):
        train_appo_ray(APPO, learner_gpus=-1)


@pytest.mark.ray
def test_a_gpu_learner_on_a_cluster_without_one_is_refused_before_any_actor_starts(ray_cluster):
    with pytest.raises(ValueError, match=r"learner_gpus=1 but no node has that many GPUs.*Fix"):
        train_appo_ray(APPO, learner_gpus=1)
    wait_until_no_actors()


@pytest.mark.ray
def test_a_shared_encoder_on_a_vector_is_refused_before_any_actor_starts(ray_cluster):
    with pytest.raises(ValueError, match=r"shared_encoder=True, but the observation is a "
                                         r"vector of 4 numbers.*Fix: leave"):
        train_appo_ray(dataclasses.replace(APPO, shared_encoder=True))
    assert wait_until_no_actors() == []


@pytest.mark.ray
@pytest.mark.slow
def test_ppo_on_ray_is_on_policy_and_solves(ray_cluster):
    result = train_ppo_ray(PPO)
    assert result.solved and result.eval_return >= 475
    assert result.policy_lags and set(result.policy_lags) == {0}  # every batch on-policy
    assert len(result.policy_lags) == result.updates * PPO.batch_fragments
    # the learner's diagnostics travel in its reports, one per update, as in one process
    assert len(result.diagnostics["approx_kl"]) == result.updates
    assert all(kl >= 0 for kl in result.diagnostics["approx_kl"])
    assert all(0 <= f <= 1 for f in result.diagnostics["clip_fraction"])
    # the run's timeline: each learner call spans its execution, so the union of the learner's
    # spans holds every second the learner reports busy; none ends after the clock stopped
    from rlkit.core.timeline import busy_seconds

    assert {"driver", "learner", "worker 0", "worker 1"} <= {s.role for s in result.timeline}
    assert all(s.start <= s.end <= result.wall_seconds for s in result.timeline if s.end)
    learner_busy = busy_seconds(result.timeline)["learner"]
    print(f"learner busy {result.learner_busy_seconds:.1f} s; its calls spanned "
          f"{learner_busy:.1f} s of {result.wall_seconds:.1f} s")
    assert result.learner_busy_seconds <= learner_busy <= result.wall_seconds
    assert wait_until_no_actors() == []


@pytest.mark.ray
@pytest.mark.slow
def test_appo_measures_its_policy_lag(ray_cluster):
    config = dataclasses.replace(APPO, total_steps=20_000, target_return=None)
    result = train_appo_ray(config)
    assert result.env_steps >= 20_000
    assert min(result.policy_lags) >= 0 and max(result.policy_lags) >= 1  # async: some lag
    assert result.max_policy_lag <= config.queue_size // config.batch_fragments + 2
    assert wait_until_no_actors() == []


@pytest.mark.ray
@pytest.mark.slow
def test_appo_with_a_learner_group_of_two(ray_cluster):
    config = dataclasses.replace(APPO, total_steps=6_000, target_return=None)
    result = train_appo_ray(config, num_learners=2)
    assert result.env_steps >= 6_000 and result.updates >= 6_000 // config.steps_per_batch
    assert set(result.placement) >= {"learner 0", "learner 1"}
    assert len(result.diagnostics["clip_fraction"]) == result.updates  # the ranks' mean
    assert wait_until_no_actors() == []


@pytest.mark.ray
@pytest.mark.slow
def test_ppo_replaces_a_killed_worker_and_goes_on(ray_cluster):
    config = dataclasses.replace(PPO, total_steps=8_000, target_return=None)
    result = train_ppo_ray(config, kill_at={"worker 0": 2_000})
    assert result.worker_restarts == 1
    assert any("worker 0" in event for event in result.history.events)
    assert result.env_steps >= 8_000 and set(result.policy_lags) == {0}
    assert wait_until_no_actors() == []


@pytest.mark.ray
@pytest.mark.slow
def test_ppo_on_ray_acts_with_a_gaussian_policy_on_pendulum(ray_cluster):
    from rlkit.algos.ppo import PENDULUM

    config = dataclasses.replace(PENDULUM, total_steps=8_000, eval_every=8_000, eval_episodes=2,
                                 target_return=None)
    result = train_ppo_ray(config)
    assert result.env_steps >= 8_000 and set(result.policy_lags) == {0}
    assert len(result.history.eval_returns) == 1 and result.history.eval_returns[0] < 0
    assert wait_until_no_actors() == []
