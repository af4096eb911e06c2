"""The A2C/A3C gradient worker and server: as plain classes, then under a local Ray cluster."""

import dataclasses
import time

import numpy as np
import pytest
import torch

from rlkit.algos.a2c import A2CConfig, A2CLearner
from rlkit.distributed.a3c.driver import train_a2c, train_a2c_ray, train_a3c_ray
from rlkit.distributed.a3c.roles import GradientMessage, GradientServer, GradientWorker, ServerStats
from rlkit.testing import faulty_envs

from conftest import actor_processes, check_timeline

SMALL = A2CConfig(envs_per_worker=2, n_steps=20, hidden=(16, 16))  # 40 env steps per gradient


def message(version, gradient, worker=0):
    return GradientMessage(gradient, version, worker, 40, [], 0.0)


def gradient_like(server, value=1e-3):
    n = sum(p.numel() for p in server.learner.net.parameters())
    return np.full(n, value, np.float32)


def test_staleness_of_a_scripted_arrival_order():
    server = GradientServer(SMALL)
    g = gradient_like(server)
    # workers A and B start on version 0. A lands first (0 updates in between), B's gradient,
    # still on version 0, lands after A's update (1). A then computed on version 1 and lands
    # after B's update (1). C started on version 0 and lands last, 3 updates later.
    for worker, version, expected_version_after in [(0, 0, 1), (1, 0, 2), (0, 1, 3), (2, 0, 4)]:
        assert server.apply(message(version, g, worker)).version == expected_version_after
    assert server.staleness == [0, 1, 1, 3] and server.senders == [0, 1, 0, 2]
    assert server.stats().updates == 4


def test_a2c_round_has_zero_staleness_and_averages():
    server = GradientServer(SMALL)
    out = server.apply_mean(message(0, gradient_like(server, 1.0)),
                            message(0, gradient_like(server, 3.0)))
    assert out.version == 1 and server.staleness == [0, 0]
    reference = GradientServer(SMALL)  # same seed, same initial weights
    reference.apply(message(0, gradient_like(reference, 2.0)))
    for k, v in reference.weights().weights.items():
        np.testing.assert_array_equal(v, out.weights[k])


def test_nan_gradient_is_skipped_counted_and_weights_unchanged():
    server = GradientServer(SMALL)
    before = server.weights()
    bad = gradient_like(server)
    bad[3] = np.nan
    after = server.apply(message(0, bad))
    assert server.stats() == ServerStats(updates=0, staleness=[0], senders=[0], skipped=1)
    assert after.version == before.version == 0
    for k, v in before.weights.items():
        np.testing.assert_array_equal(v, after.weights[k])
    # a round with one bad and one good gradient applies the good one alone
    after = server.apply_mean(message(0, bad), message(0, gradient_like(server)))
    assert after.version == 1 and server.skipped == 2


def test_worker_whose_loss_overflows_sends_a_non_finite_gradient_the_server_skips():
    config = dataclasses.replace(SMALL, env_id=faulty_envs.HUGE_REWARD)  # 3e38 from step 300
    worker, server = GradientWorker(config, 0), GradientServer(SMALL)
    weights, versions = server.weights(), []
    for _ in range(16):  # 16 * 20 = 320 steps of each env
        weights = server.apply(worker.compute_gradient(weights))
        versions.append(weights.version)
    assert 0 < server.skipped < 16 and server.version == 16 - server.skipped
    # the skipped ones are exactly the gradients from the first huge reward on (they never
    # stop), not a few scattered ones: the version stops growing once, for good
    skipped_at = [i for i, v in enumerate(versions) if v == (versions[i - 1] if i else 0)]
    assert skipped_at == list(range(skipped_at[0], 16))
    assert all(np.isfinite(v).all() for v in weights.weights.values())


def test_workers_seed_their_envs_apart():
    a, b = GradientWorker(SMALL, 0), GradientWorker(SMALL, 1)
    assert not np.array_equal(a.runner.obs, b.runner.obs)
    again = GradientWorker(SMALL, 0)
    np.testing.assert_array_equal(a.runner.obs, again.runner.obs)


def test_fragment_shapes_and_episode_ends():
    worker = GradientWorker(dataclasses.replace(SMALL, n_steps=60), 0)
    fragment = worker.collect()
    assert fragment.obs.shape == fragment.next_obs.shape == (60, 2, 4)
    assert fragment.actions.shape == fragment.log_probs.shape == (60, 2)
    # a random CartPole policy ends episodes well inside 60 steps; each end is a termination,
    # and the row after each end (inside the fragment) is a reset row
    assert fragment.terminations.sum() == len(fragment.episode_returns) > 0
    assert fragment.truncations.sum() == 0
    np.testing.assert_array_equal(fragment.resets[1:], fragment.ends[:-1])
    assert fragment.num_steps == 120 - fragment.resets.sum()


def test_a2c_with_one_worker_equals_a_single_process_update_on_the_same_batch():
    server = GradientServer(SMALL)
    torch.manual_seed(SMALL.seed)
    single = A2CLearner(4, 2, SMALL)  # same seed: the same initial weights as the server
    worker = GradientWorker(SMALL, 0)
    start = server.weights()
    twin = GradientWorker(SMALL, 0)  # same seeds: it collects the batch the worker will collect
    twin.learner.set_weights(start.weights)
    fragment = twin.collect()
    single.apply_gradient(single.compute_gradient(fragment))
    after = server.apply_mean(worker.compute_gradient(start))
    for k, v in single.get_weights().items():
        np.testing.assert_array_equal(v, after.weights[k])


def test_train_a2c_single_process_is_reproducible():
    a = train_a2c(dataclasses.replace(SMALL, total_steps=400, eval_every=None))
    b = train_a2c(dataclasses.replace(SMALL, total_steps=400, eval_every=None))
    # budgets count real env steps (reset rows are not steps): the 40-row fragments hold fewer
    assert a.env_steps == b.env_steps >= 400 and a.updates == b.updates >= 10
    for k, v in a.weights.items():
        np.testing.assert_array_equal(v, b.weights[k])


def wait_for_no_gradient_actors(seconds=15.0):
    deadline = time.monotonic() + seconds
    while (left := actor_processes("GradientWorker", "GradientServer")) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def test_worker_env_ids_must_match_workers():
    """The config refuses it, before any driver is called."""
    with pytest.raises(ValueError, match=r"worker_env_ids=\[None\] has 1 entries for "
                                         r"num_workers=2. Fix: give one id \(or None\) per"):
        dataclasses.replace(SMALL, worker_env_ids=[None])
    assert dataclasses.replace(SMALL, worker_env_ids=[None, "CartPole-v1"]).worker_env_ids == (
        None, "CartPole-v1")  # held as a tuple: the config stays frozen


@pytest.mark.ray
def test_a2c_one_worker_under_ray_equals_single_process(ray_cluster):
    ray_run = train_a2c_ray(dataclasses.replace(SMALL, num_workers=1, total_steps=200,
                                                eval_every=None))
    local = train_a2c(dataclasses.replace(SMALL, total_steps=200, eval_every=None))
    assert ray_run.updates == local.updates >= 5  # 40-row fragments, fewer real steps
    for k, v in local.weights.items():
        np.testing.assert_array_equal(v, ray_run.weights[k])
    assert ray_run.staleness == [0] * ray_run.updates
    check_timeline(ray_run, {"worker 0"})


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("driver", [train_a3c_ray, train_a2c_ray])
def test_killed_worker_is_replaced_and_non_finite_gradients_skipped(ray_cluster, driver):
    # worker 0 is killed after 400 env steps; worker 1's env returns rewards of 3e38 from its
    # 300th step on, whose returns overflow float32: its later gradients are not finite and
    # the server skips them
    run = driver(dataclasses.replace(SMALL, total_steps=2000, eval_every=None,
                                     worker_env_ids=[None, faulty_envs.HUGE_REWARD]),
                 kill_at={"worker 0": 400})
    print(driver.__name__, f"startup {run.startup_seconds:.1f} s, run {run.wall_seconds:.1f} s")
    assert run.worker_restarts == 1
    assert any("worker 0 failed" in e and "restarted" in e for e in run.history.events)
    assert run.env_steps >= 2000 and len(run.staleness) >= 2000 // 40 - 2
    # the budget kept: past it by at most one fragment per worker
    assert run.env_steps <= 2000 + SMALL.num_workers * SMALL.n_steps * SMALL.envs_per_worker
    assert run.skipped_updates > 0 and run.updates > 0
    if driver is train_a3c_ray:
        assert run.updates == len(run.staleness) - run.skipped_updates
        assert max(run.staleness) >= 1  # some gradient lands after the other worker's update
    else:
        assert run.staleness == [0] * len(run.staleness)
    assert all(np.isfinite(v).all() for v in run.weights.values())
    assert wait_for_no_gradient_actors() == []


@pytest.mark.ray
@pytest.mark.parametrize("driver", [train_a3c_ray, train_a2c_ray])
def test_an_interrupted_checkpoint_counts_only_the_gradients_applied(ray_cluster, tmp_path,
                                                                     monkeypatch, capsys, driver):
    """A Ctrl-C right after the 3rd gradient arrives: its env steps are counted, its gradient
    not yet sent to the server (A3C), or its round not complete (A2C). The checkpoint holds the
    server's state, so it counts only the applied gradients' steps and holds only their losses
    and episodes, and the message says the count it saved. (Before the fix it counted the
    received ones: with 128-step gradients, 370 env steps for 2 A3C updates, 372 for 1 A2C
    round; and its history held the 3rd gradient's loss.)"""
    from rlkit.distributed.a3c.driver import GradientServerRun
    from rlkit.train.checkpoint import load_checkpoint

    config = dataclasses.replace(SMALL, total_steps=100_000, eval_every=None)
    original, calls = GradientServerRun.receive, [0]

    def stop(self, *args):
        message = original(self, *args)
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return message

    monkeypatch.setattr(GradientServerRun, "receive", stop)
    with pytest.raises(KeyboardInterrupt):
        driver(config, checkpoint_dir=tmp_path)
    monkeypatch.undo()
    saved = load_checkpoint(tmp_path, "A2C", config)
    per_gradient = config.n_steps * config.envs_per_worker  # grid rows; real steps a few fewer
    gradients = saved.updates * (config.num_workers if driver is train_a2c_ray else 1)
    assert 0 < saved.env_steps <= gradients * per_gradient
    assert saved.env_steps > (gradients - 1) * per_gradient
    # the history is the applied gradients': one loss each, nothing logged past the count
    assert len(saved.history.losses) == gradients
    assert max(saved.history.loss_steps + saved.history.episode_steps) <= saved.env_steps
    assert f"interrupted at env step {saved.env_steps}; checkpoint saved" in capsys.readouterr().out
    assert wait_for_no_gradient_actors() == []
