"""Ape-X: its config, its roles in one process (no Ray), and short runs under a local cluster."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rlkit.algos.apex import ApexConfig, ApexDDPG, ApexDQN
from rlkit.algos.ddpg import DDPGConfig
from rlkit.algos.dqn import DQNConfig, dqn_td_errors, greedy_batch_policy
from rlkit.core.common import eval_seed, updates_due
from rlkit.core.networks import QNetwork, load_numpy_weights
from rlkit.distributed.apex.roles import ApexLearner, ApexWorker
from rlkit.distributed.apex.shards import LocalShards, ReplayShard
from rlkit.distributed.runtime.parameter_server import LocalChannel, ParameterServer
from rlkit.envs.evaluation import evaluate_policy

from conftest import check_timeline, wait_until_no_actors

SMALL_DQN = DQNConfig(hidden=(32, 32), batch_size=32, learning_starts=64, total_steps=600,
                      eval_every=300, eval_episodes=2, buffer_size=2_000)


@pytest.mark.parametrize("field,value,message", [
    ("n_step", 0, "n_step=0 must be an int >= 1"),
    ("alpha", 1.5, r"alpha=1.5 must be a finite number in \[0, 1\]"),
    ("beta_start", -0.1, "beta_start=-0.1 must be a finite number in"),
])
def test_bad_apex_settings_name_the_field_and_the_fix(field, value, message):
    with pytest.raises(ValueError, match=message):
        ApexConfig(**{field: value})


def test_the_workers_shape_is_the_algorithm_configs_and_checked_against_the_shards():
    """Workers, envs and fragments are the DQN/DDPG config's (one source for every off-policy
    driver); Ape-X's own config may not ask for more shards than there are workers."""
    with pytest.raises(ValueError, match="fragment_steps=30 is not a multiple of "
                                         "envs_per_worker=4. Fix: use 28"):
        DQNConfig(envs_per_worker=4, fragment_steps=30)
    with pytest.raises(ValueError, match=r"num_shards=3 exceeds DQNConfig.num_workers=2. Fix: "):
        ApexDQN(DQNConfig(), ApexConfig(num_shards=3))
    with pytest.raises(ValueError, match=r"num_shards=2 exceeds DDPGConfig.num_workers=1"):
        ApexDDPG(DDPGConfig(num_workers=1), ApexConfig())


def local_system(algo):
    """A parameter server, shards, a learner and one worker per index, all in this process."""
    apex = algo.apex
    shards = LocalShards([ReplayShard(1_000, 4, None, apex.alpha, seed=k)
                          for k in range(apex.num_shards)])
    channel = LocalChannel(ParameterServer())
    learner = ApexLearner(algo, channel, shards)
    learner.publish()
    workers = [ApexWorker(algo, i, channel, shards) for i in range(algo.config.num_workers)]
    return shards, learner, workers


def test_workers_prioritize_with_the_learners_weights_and_the_learner_updates_priorities():
    algo = ApexDQN(dataclasses.replace(SMALL_DQN, envs_per_worker=2, fragment_steps=40),
                   ApexConfig(num_shards=2, n_step=3))
    shards, learner, workers = local_system(algo)
    for _ in range(3):
        for w in workers:
            report = w.collect(40)
            assert 40 <= report.env_steps < 42 and report.weights_version == 1  # 2 envs
    # each worker wrote only to its own shard, n-step windows still open are held back
    sizes = [len(s.replay) for s in shards.shards]
    assert all(100 <= n <= 120 for n in sizes), sizes
    # the stored priorities are the worker's |TD errors| under the learner's current weights
    replay = shards.shards[0].replay
    stored = replay.tree[np.arange(len(replay))]
    batch = type(replay.storage)(*(f[:len(replay)] for f in replay.storage))
    expected = dqn_td_errors(learner.learner.q, learner.learner.q_target, batch, True)
    np.testing.assert_allclose(stored, (expected + replay.eps) ** replay.alpha, rtol=1e-5)
    sent = {k: [] for k in range(len(shards.shards))}  # what the learner sends each shard
    for k, shard in enumerate(shards.shards):
        def record(ids, td_errors, k=k, original=shard.replay.update_priorities):
            sent[k].append((np.asarray(ids), np.asarray(td_errors)))
            return original(ids, td_errors)
        shard.replay.update_priorities = record
    report = learner.train(8, progress=0.5)
    assert report.updates == 8 and np.isfinite(report.loss) and report.beta == 0.7
    # new priorities came back to both shards, for items of that shard, as (|td| + eps)^alpha
    assert all(sent.values())
    for k, shard in enumerate(shards.shards):
        replay, newest = shard.replay, {}
        for ids, td_errors in sent[k]:
            assert ids.max() < replay.added  # ids this shard handed out
            newest.update(zip(ids.tolist(), td_errors.tolist()))  # a later value wins
        ids = np.array(list(newest))
        np.testing.assert_allclose(replay.tree[ids % replay.capacity],
                                   replay.priority_of(np.array(list(newest.values()))),
                                   rtol=1e-6)


def test_the_ladder_is_dealt_across_workers():
    algo = ApexDQN(dataclasses.replace(SMALL_DQN, envs_per_worker=4, fragment_steps=40))
    _, _, workers = local_system(algo)
    ladder = 0.4 ** (1 + 7 * np.arange(8) / 7)
    np.testing.assert_allclose(workers[0].rungs, ladder[0::2])
    np.testing.assert_allclose(workers[1].rungs, ladder[1::2])


def test_apex_ddpg_roles_in_one_process():
    cfg = DDPGConfig(hidden=(32, 32), batch_size=32, learning_starts=64, total_steps=600,
                     num_workers=1, envs_per_worker=2, fragment_steps=40)
    algo = ApexDDPG(cfg, ApexConfig(num_shards=1))
    shards = LocalShards([ReplayShard(1_000, 3, 1, 0.6, seed=0)])
    channel = LocalChannel(ParameterServer())
    learner = ApexLearner(algo, channel, shards)
    learner.publish()
    worker = ApexWorker(algo, 0, channel, shards)
    for _ in range(3):
        worker.collect(40)
    report = learner.train(4, progress=0.0)
    assert report.updates == 4 and np.isfinite(report.loss)
    np.testing.assert_allclose(worker.rungs, [0.5, 0.05])


def test_apex_dqn_under_ray_with_two_shards_and_nothing_left_running(ray_cluster):
    from rlkit.distributed.apex.driver import HISTOGRAMS_PER_EVAL, train_apex_ray

    algo = ApexDQN(dataclasses.replace(SMALL_DQN, envs_per_worker=2, fragment_steps=40),
                   ApexConfig(num_shards=2, updates_per_call=8))
    result = train_apex_ray(algo, kill_at={"worker 0": 200})
    assert result.env_steps >= 600 and result.updates > 0
    assert len(result.shard_sizes) == 2 and min(result.shard_sizes) > 0
    assert result.worker_restarts == 1 and "worker 0 failed" in result.history.events[0]
    check_timeline(result, {"worker 0", "worker 1", "learner", "evaluator"})
    assert result.history.eval_steps
    # a priority histogram each time the env steps passed a multiple of eval_every / 4 (a report
    # of 80 env steps may pass two multiples of 75 at once): 600 env steps give at least 4
    every = SMALL_DQN.eval_every // HISTOGRAMS_PER_EVAL
    marks = [steps // every for steps, _ in result.priority_histograms]
    assert marks == sorted(set(marks)) and marks[0] >= 1 and len(marks) >= HISTOGRAMS_PER_EVAL
    # the run ends with an evaluation of exactly the weights it returns
    q = QNetwork(4, 2, SMALL_DQN.hidden)
    load_numpy_weights(q, result.weights)
    last = len(result.history.eval_steps) - 1
    again = evaluate_policy(greedy_batch_policy(q), "CartPole-v1", SMALL_DQN.eval_episodes,
                            eval_seed(SMALL_DQN.seed, last, SMALL_DQN.eval_episodes))
    assert result.eval_return == pytest.approx(again.mean())
    # the rate limiter held: never more updates than the env steps allow
    assert result.updates <= updates_due(result.env_steps, SMALL_DQN.learning_starts,
                                         SMALL_DQN.train_every)
    assert wait_until_no_actors() == []


def test_more_shards_than_cpus_fails_before_any_actor_starts(ray_cluster):
    from rlkit.distributed.apex.driver import train_apex_ray

    algo = ApexDQN(dataclasses.replace(SMALL_DQN, num_workers=3, fragment_steps=10),
                   ApexConfig(num_shards=3))
    with pytest.raises(ValueError, match="num_shards=3 is more than the cluster's 2 CPUs"):
        train_apex_ray(algo)



def test_ape_x_takes_any_algorithm_with_the_protocols_members():
    """No list of allowed classes (issue 39): an object with every member of ApexAlgorithm is
    taken; one missing a member is refused naming it, before anything starts."""
    from types import SimpleNamespace

    from rlkit.algos.apex import ApexAlgorithm, check_apex_algorithm

    algo = ApexDQN(SMALL_DQN)
    members = {m: getattr(algo, m) for m in (*ApexAlgorithm.__annotations__,
                                             *(n for n in vars(ApexAlgorithm) if n[0] != "_"))}
    check_apex_algorithm("train_apex_ray", SimpleNamespace(**members))  # duck-typed: taken
    del members["ladder"]
    with pytest.raises(TypeError, match=r"got SimpleNamespace, which lacks ladder. Fix:"):
        check_apex_algorithm("train_apex_ray", SimpleNamespace(**members))
