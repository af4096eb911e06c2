"""IMPALA: config checks, the roles without Ray (queue, back-pressure, lag), then under Ray."""

import dataclasses
import threading
import time

import numpy as np
import pytest
import torch

from rlkit.algos.impala import IMPALAConfig, VTraceLearner, impala_loss, stack_fragments
from rlkit.distributed.impala.roles import IMPALAWorker, IMPALALearner, FragmentQueue
from rlkit.envs.runner import EnvRunner, check_fragment
from rlkit.train.impala import train_impala

SMALL = IMPALAConfig(num_workers=2, envs_per_worker=2, unroll_length=5, batch_fragments=2,
                     queue_size=2, hidden=(16,))


@pytest.mark.parametrize("kwargs,match", [
    (dict(rho_bar=0.5, c_bar=1.0), r"rho_bar=0.5 is below c_bar=1.0.*Fix: raise rho_bar"),
    (dict(unroll_length=0), r"unroll_length=0 must be an int >= 1.*Fix"),
    (dict(queue_size=2, batch_fragments=4), r"queue_size=2 is below batch_fragments=4.*Fix"),
    (dict(synchronous=True, num_workers=3, batch_fragments=4, queue_size=8),
     r"batch_fragments=4 is not a multiple of num_workers=3.*Fix"),
    (dict(gamma=1.0), r"gamma=1.0 must be a finite number in \[0, 1\).*Fix"),
    (dict(hidden=()), r"hidden=\(\) must be a non-empty tuple"),
])
def test_config_rejects_bad_values_naming_field_and_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        IMPALAConfig(**kwargs)


def zero_policy(obs):
    return np.zeros(len(obs), np.int64), np.zeros(len(obs), np.float32)


def test_fragments_are_fixed_length_and_a_reset_row_is_masked_out_of_the_loss():
    runner = EnvRunner("CartPole-v1", 0, "discrete", "IMPALA", num_envs=2)
    frag = runner.run(30, zero_policy, fixed_length=True)  # always left: falls within 30 steps
    check_fragment(frag, need_log_probs=True)
    assert frag.obs.shape == (30, 2, 4) and frag.resets.any()
    t, j = map(int, np.argwhere(frag.resets)[0])
    torch.manual_seed(0)
    net = VTraceLearner(4, 2, SMALL).net
    base = impala_loss(net, stack_fragments([frag]), SMALL)[0]
    frag.obs[t, j] += 3.0  # a reset row is not a step: nothing of it may reach the loss
    frag.rewards[t, j], frag.log_probs[t, j] = 50.0, -5.0
    assert torch.allclose(impala_loss(net, stack_fragments([frag]), SMALL)[0], base)
    frag.rewards[t - 1, j] = 50.0  # the step that ended the episode is real: it counts
    assert not torch.allclose(impala_loss(net, stack_fragments([frag]), SMALL)[0], base)


def test_mismatched_fragment_is_rejected_naming_the_field():
    runner = EnvRunner("CartPole-v1", 0, "discrete", "IMPALA", num_envs=2)
    traj = runner.run(3, zero_policy, fixed_length=True)
    bad = dataclasses.replace(traj, rewards=traj.rewards[:2])
    with pytest.raises(ValueError, match=r"rewards has shape \(2, 2\).*\(3, 2\).*Fix"):
        stack_fragments([bad])
    other = runner.run(4, zero_policy, fixed_length=True)
    with pytest.raises(ValueError, match=r"different lengths T=\[3, 4\].*Fix: give every actor"):
        stack_fragments([traj, other])
    greedy = runner.run(3, lambda o: np.zeros(len(o), np.int64), fixed_length=True)
    with pytest.raises(ValueError, match=r"log_probs is None.*Fix: act with a policy"):
        stack_fragments([greedy])


def test_actor_and_learner_in_process_measure_lag():
    queue = FragmentQueue(maxsize=4)
    learner = IMPALALearner(SMALL, 4, 2, queue)  # publishes version 0
    actor = IMPALAWorker(SMALL, 0, queue)
    assert actor.run(max_fragments=2) == 2  # acts with version 0
    out = learner.train(1)
    assert out.lags == [0, 0] and out.updates == 1
    assert out.env_steps == 2 * SMALL.unroll_length * SMALL.envs_per_worker
    assert queue.version == 1
    # the actor learns of version 1 from its next put's reply, after shipping with version 0
    actor.run(max_fragments=2)
    assert actor.version == 1
    out = learner.train(1)
    assert out.lags == [1, 0]  # first fragment acted with version 0, learner at version 1


def _wait_until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition never became true"
        time.sleep(0.05)


def test_slow_learner_makes_actors_wait_and_queue_stays_bounded():
    queue = FragmentQueue(maxsize=3)
    IMPALALearner(SMALL, 4, 2, queue)  # publishes version 0, then is never asked to train
    actors = [IMPALAWorker(SMALL, i, queue) for i in range(2)]
    shipped = []
    threads = [threading.Thread(target=lambda a=a: shipped.append(a.run())) for a in actors]
    try:
        for t in threads:
            t.start()
        # the queue fills and both actors block on a put, each holding one more fragment
        _wait_until(lambda: queue.stats().waiting_puts == 2)
        assert queue.stats().size == 3 and queue.high_water == 3  # full, never more
        collected = sum(a.fragments for a in actors)
        assert collected == 3 + len(actors)
        time.sleep(0.5)
        assert sum(a.fragments for a in actors) == collected  # they wait, they do not collect
        # a slow learner takes a batch now and then: the actors refill, still bounded
        for _ in range(3):
            assert len(queue.get_batch(2, timeout=5.0)) == 2
            time.sleep(0.2)
        assert queue.high_water == 3 and queue.wait_seconds > 1.0  # two actors, 0.5 s each+
    finally:
        queue.close()
        for t in threads:
            t.join(timeout=10)
    assert not any(t.is_alive() for t in threads) and sorted(shipped) == sorted(
        a.fragments - 1 for a in actors)  # the fragment in hand when the queue closed is dropped


def test_a_shrunk_round_releases_a_learner_waiting_for_a_lost_workers_fragment():
    """Synchronous PPO lost one of its two workers for good: the learner, already waiting for
    a batch of two, takes the one fragment the worker left sends (issue 38). A fragment the
    lost worker sent before it went is dropped: taken alone, it would make a round of its own,
    and every round after would train on fragments one version old."""
    queue = FragmentQueue(maxsize=4)
    left, lost = IMPALAWorker(SMALL, 0, queue), IMPALAWorker(SMALL, 1, queue)
    queue.publish(0, IMPALALearner(SMALL, 4, 2, queue).learner.get_weights())
    queue.put(left.collect(), timeout=5.0)
    got = []
    waiting = threading.Thread(target=lambda: got.append(queue.get_batch(2, timeout=60.0)))
    waiting.start()
    time.sleep(0.2)
    assert not got  # one of two: it waits
    queue.shrink_rounds(1, 2, lost=1)
    waiting.join(timeout=30.0)
    assert [[f.worker for f in b] for b in got] == [[0]]  # released with the one
    queue.put(left.collect(), timeout=5.0)
    assert len(queue.get_batch(2, timeout=5.0)) == 1  # and every round after

    other = FragmentQueue(maxsize=4)  # the lost worker had sent its share of the round
    other.put(lost.collect(), timeout=5.0)
    other.shrink_rounds(1, 2, lost=1)
    assert other.stats().size == 0  # dropped: the round waits for the worker left


def test_a_worker_waits_for_weights_through_a_learner_group_restart_and_no_longer():
    """After a rank's node is lost the group restarts (seconds, on a loaded machine more than a
    worker's wait for weights): a synchronous worker waiting for the next version must wait on,
    not fail and be restarted (issue 38). Once the restart is over, its wait runs out again."""
    queue = FragmentQueue(maxsize=4)
    worker = IMPALAWorker(SMALL, 0, queue, timeout_s=0.05)
    weights = IMPALALearner(SMALL, 4, 2, queue).learner.get_weights()
    queue.publish(3, weights)
    worker.load_newer(-1)
    assert worker.version == 3
    queue.learner_restart(True)
    waiting = threading.Thread(target=worker.load_newer, args=(3,))
    waiting.start()
    time.sleep(0.5)  # ten of its waits ran out meanwhile: each was asked again
    assert waiting.is_alive() and worker.version == 3
    queue.publish(4, weights)  # the restored rank 0 publishes, then the driver says it is over
    queue.learner_restart(False)
    waiting.join(timeout=10.0)
    assert not waiting.is_alive() and worker.version == 4
    with pytest.raises(TimeoutError, match=r"no weights newer than version 4 within 0.05 s"):
        worker.load_newer(4)  # no restart under way: the wait runs out as before
    answers = []  # a restart that begins and ends inside one wait: that wait is asked again
    asking = threading.Thread(target=lambda: answers.append(queue.wait_for_version(4, 2.0)))
    asking.start()
    time.sleep(0.5)  # (a thread starts waiting within milliseconds)
    queue.learner_restart(True)
    queue.learner_restart(False)
    asking.join(timeout=10.0)
    assert answers == [None]


def test_a_restart_ends_the_old_ranks_waits_so_the_new_ranks_get_the_next_fragments():
    """A killed rank's ``get_batch`` still waits in the queue's thread: without the restart's
    signal it would take the first fragment sent after the restart, and the new group (in a
    synchronous run, whose workers then wait for weights) would wait for it until timeouts."""
    queue = FragmentQueue(maxsize=4)
    got = []
    old_rank = threading.Thread(target=lambda: got.append(queue.get_batch(1, timeout=60.0)))
    old_rank.start()
    time.sleep(0.2)  # waiting
    queue.learner_restart(True)
    old_rank.join(timeout=10.0)
    assert got == [[]]  # ended, empty-handed
    queue.learner_restart(False)
    queue.put(IMPALAWorker(SMALL, 1, queue).collect(), timeout=5.0)
    assert [f.worker for f in queue.get_batch(1, timeout=5.0)] == [1]  # the new rank's


def _clocked(busy: float, learner_wait: float, actor_wait: float) -> "IMPALAResult":
    """A hand-made 10-second run with these learner and (summed) actor clocks."""
    from rlkit.core.metrics import History
    from rlkit.train.impala import IMPALAResult

    return IMPALAResult(history=History(), solved=True, eval_return=1.0, env_steps=1_000,
                        wall_seconds=10.0, updates=1, weights=None, learner_busy_seconds=busy,
                        learner_wait_seconds=learner_wait, actor_wait_seconds=actor_wait)


def test_pace_names_the_side_that_waited_less_from_the_runs_own_clocks():
    # the actors waited 6 s each (12 s summed over 2) for room, the learner 0.1 s for a batch
    learner_bound = _clocked(9.7, 0.1, 12.0).pace(num_workers=2)
    assert (learner_bound.learner_busy, learner_bound.actors_waiting) == (0.97, 0.6)
    assert learner_bound.limit == "learner" and "the learner set the pace" in str(learner_bound)
    # one worker, never blocked; the learner waited 3 s of 10 for frames
    actor_bound = _clocked(6.8, 3.0, 0.0).pace(num_workers=1)
    assert actor_bound.limit == "actors" and "waiting for a batch 30%" in str(actor_bound)
    # both waited under PACE_WAIT_FLOOR: neither side is named
    assert _clocked(9.0, 0.2, 0.8).pace(num_workers=2).limit == "neither"
    with pytest.raises(ValueError, match="num_workers=0 must be an int >= 1"):
        _clocked(1.0, 0.0, 0.0).pace(num_workers=0)


def test_queue_get_times_out_with_a_clear_error():
    with pytest.raises(TimeoutError, match=r"got 0 of the 2 fragments.*Fix"):
        FragmentQueue(maxsize=2).get_batch(2, timeout=0.1)


def test_single_process_is_reproducible_and_learns_shape():
    config = dataclasses.replace(SMALL, total_steps=400, eval_every=200, eval_episodes=2,
                                 target_return=None)
    a, b = train_impala(config, policy_lag=2), train_impala(config, policy_lag=2)
    assert a.env_steps == b.env_steps >= 400
    assert a.history.eval_returns == b.history.eval_returns
    assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)
    assert a.policy_lags[:2] == [0, 0] and max(a.policy_lags) == 2


def test_learner_rejects_a_non_finite_loss():
    learner = VTraceLearner(4, 2, SMALL)
    runner = EnvRunner("CartPole-v1", 0, "discrete", "IMPALA", num_envs=2)
    traj = runner.run(3, zero_policy, fixed_length=True)
    traj.rewards[0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="rewards holds NaN or infinite values.*Fix"):
        learner.update([traj])  # V-trace names the input before the loss goes NaN


def test_an_update_takes_one_sgd_step_per_interleaved_group_of_env_columns():
    """minibatch_envs=1 on 2 fragments of 2 envs: 4 SGD steps, step j on column j (fragment
    j // 2, env j % 2), each V-trace target computed with the weights of that step; done by hand
    on a twin learner, the weights agree. minibatch_envs=4 (all columns) is one step."""
    runner = EnvRunner("CartPole-v1", 0, "discrete", "IMPALA", num_envs=2)
    rng = np.random.default_rng(0)

    def random_policy(obs):
        return rng.integers(0, 2, len(obs)), np.full(len(obs), np.log(0.5), np.float32)

    fragments = [runner.run(6, random_policy, fixed_length=True) for _ in range(2)]
    for envs, steps in ((1, 4), (2, 2), (4, 1)):
        config = dataclasses.replace(SMALL, minibatch_envs=envs)
        assert config.minibatches == steps
        learner, twin = VTraceLearner(4, 2, config), VTraceLearner(4, 2, config)
        batch = stack_fragments(fragments)
        for j in range(steps):
            loss = impala_loss(twin.net, {k: v[:, j::steps] for k, v in batch.items()}, config)[0]
            twin.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(twin.net.parameters(), config.max_grad_norm)
            twin.optimizer.step()
        learner.update(fragments)
        assert learner.updates == 1  # one version, however many SGD steps
        for a, b in zip(learner.net.parameters(), twin.net.parameters(), strict=True):
            assert torch.equal(a, b), (envs, steps)
    one, four = (VTraceLearner(4, 2, dataclasses.replace(SMALL, minibatch_envs=e))
                 for e in (4, 1))
    one.update(fragments), four.update(fragments)
    assert not all(torch.equal(a, b) for a, b in zip(one.net.parameters(),
                                                     four.net.parameters(), strict=True))


def test_minibatch_envs_is_impala_s_and_a_group_needs_a_column_per_step():
    from rlkit.algos.ppo import PPOConfig
    from rlkit.distributed.impala.driver import IMPALARun
    from rlkit.distributed.runtime.options import RunOptions

    with pytest.raises(ValueError, match=r"minibatch_envs=4 is IMPALA's.*Fix: set minibatch_size"):
        PPOConfig(minibatch_envs=4)
    with pytest.raises(ValueError, match=r"minibatch_envs=0 must be an int >= 1"):
        IMPALAConfig(minibatch_envs=0)
    # 2 fragments of 2 envs, 1 column a step: 4 steps; 2 ranks would hold 2 columns each
    config = dataclasses.replace(SMALL, minibatch_envs=1)
    with pytest.raises(ValueError, match=r"num_learners=2 leaves each rank 2 env columns per "
                       r"update, fewer than the 4 SGD steps.*minibatch_envs >= 2"):
        IMPALARun(config, RunOptions(num_learners=2))


# ---------------------------------------------------------------- under Ray

RAY_CONFIG = IMPALAConfig(envs_per_worker=4, unroll_length=16, batch_fragments=4, queue_size=4,
                          hidden=(32, 32), total_steps=30_000, eval_every=15_000,
                          eval_episodes=2, target_return=None)


def no_impala_processes(seconds=10.0):
    from conftest import our_ray_processes

    deadline = time.monotonic() + seconds
    names = ("IMPALAWorker", "IMPALALearner", "FragmentQueue")
    while (left := [p for p in our_ray_processes() if any(n in p for n in names)]) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.ray
def test_ray_queue_back_pressure_blocks_an_actor(ray_cluster):
    ray = ray_cluster
    queue = ray.remote(FragmentQueue).options(num_cpus=0, max_concurrency=6).remote(2)
    actor = ray.remote(IMPALAWorker).options(num_cpus=0.5).remote(RAY_CONFIG, 0, queue)
    try:
        ray.get([queue.publish.remote(0, None), actor.ping.remote()], timeout=60)
        run = actor.run.remote()
        deadline = time.monotonic() + 30  # until the actor is blocked on its third put
        while ray.get(queue.stats.remote(), timeout=30).waiting_puts < 1:
            assert time.monotonic() < deadline, "the actor never blocked on the full queue"
            time.sleep(0.1)
        ready, _ = ray.wait([run], timeout=0.5)
        assert not ready  # no learner: the actor is stuck waiting for room
        stats = ray.get(queue.stats.remote(), timeout=30)
        assert stats.size == 2 and stats.high_water == 2 and stats.waiting_puts == 1
        ray.get(queue.close.remote(), timeout=30)
        assert ray.get(run, timeout=30) == 2  # released by close, nothing more was queued
    finally:
        ray.kill(actor, no_restart=True)
        ray.kill(queue, no_restart=True)


@pytest.mark.ray
@pytest.mark.slow
def test_short_impala_run_under_ray(ray_cluster):
    from rlkit.distributed.impala.driver import train_impala_ray

    config = dataclasses.replace(RAY_CONFIG, total_steps=600)
    result = train_impala_ray(config)
    # the budget kept: past it by less than one update (256 env steps), as the learner is asked
    # for no more updates than the budget holds; a first call of 4 updates would run ~1,000
    update_steps = config.batch_fragments * config.steps_per_fragment
    assert config.total_steps <= result.env_steps < config.total_steps + update_steps
    assert result.updates * RAY_CONFIG.batch_fragments == len(result.policy_lags)
    assert min(result.policy_lags) >= 0
    assert result.queue_high_water <= RAY_CONFIG.queue_size
    assert result.history.eval_steps and result.history.episode_returns
    assert result.worker_restarts == 0
    assert no_impala_processes() == []


@pytest.mark.ray
@pytest.mark.slow
def test_synchronous_mode_has_zero_lag(ray_cluster):
    from rlkit.distributed.impala.driver import train_impala_ray

    config = dataclasses.replace(RAY_CONFIG, synchronous=True, total_steps=10_000)
    result = train_impala_ray(config)
    assert result.policy_lags and set(result.policy_lags) == {0}


def test_a_fragment_is_unroll_length_steps_of_every_env():
    assert IMPALAConfig(unroll_length=5, envs_per_worker=3).steps_per_fragment == 15


# ---- a Ctrl-C's checkpoint agrees with itself (the queue driver: IMPALA, PPO, APPO)

#: Where the stop button is pressed: (what is patched, its name, on which call). A learner
#: report handled (one learner call still in flight), a greedy evaluation in the driver (two in
#: flight), and the loop waiting for the next finished call.
STOP_POINTS = {"in a learner report": ("rlkit.core.metrics", "History", "log_loss", 3),
               "during an evaluation": ("rlkit.distributed.impala.driver", None, "greedy_eval", 1),
               "waiting between calls": ("rlkit.distributed.runtime.supervisor", "Supervisor",
                                         "wait_one", 8)}


def press_stop(monkeypatch, point: str) -> None:
    """Raise ``KeyboardInterrupt`` at ``point`` of :data:`STOP_POINTS`, as a Ctrl-C there would."""
    import importlib

    module, cls, name, n = STOP_POINTS[point]
    target = importlib.import_module(module)
    target = getattr(target, cls) if cls else target
    original, calls = getattr(target, name), [0]

    def stop(*args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, stop)


def ppo_config():
    from rlkit.algos.ppo import PPOConfig

    return PPOConfig(hidden=(32, 32), total_steps=200_000, eval_every=1_500, eval_episodes=2,
                     target_return=None)


@pytest.mark.ray
@pytest.mark.parametrize("algorithm, point", [("IMPALA", p) for p in STOP_POINTS]
                         + [("PPO", "in a learner report")])
def test_an_interrupted_checkpoint_counts_the_env_steps_its_learner_trained_on(
        ray_cluster, tmp_path, monkeypatch, algorithm, point):
    """The learner runs its calls in order, so the state a Ctrl-C's checkpoint reads already
    holds the updates of the calls in flight. Their env steps are in the checkpoint too: each
    update took ``B`` fragments of ``T x N`` grid rows, of which the real steps are all but the
    reset rows (a few per cent here; counting only the calls reported gave 72-73% at the first
    point)."""
    from rlkit.distributed.impala.driver import train_impala_ray, train_ppo_ray
    from rlkit.train.checkpoint import load_checkpoint

    config = (dataclasses.replace(RAY_CONFIG, total_steps=200_000, eval_every=3_000)
              if algorithm == "IMPALA" else ppo_config())
    train = train_impala_ray if algorithm == "IMPALA" else train_ppo_ray
    press_stop(monkeypatch, point)
    with pytest.raises(KeyboardInterrupt):
        train(config, checkpoint_dir=tmp_path)
    monkeypatch.undo()
    assert no_impala_processes() == []
    saved = load_checkpoint(tmp_path, algorithm, config)
    grid = saved.updates * config.batch_fragments * config.steps_per_fragment
    print(f"{algorithm}, Ctrl-C {point}: {saved.updates} updates, {saved.env_steps:,} env steps "
          f"of {grid:,} grid rows ({saved.env_steps / grid:.1%})")
    assert saved.updates > 0 and 0.85 * grid <= saved.env_steps <= grid
    if point == "in a learner report":  # and a resume goes on from there
        more = dataclasses.replace(config, total_steps=saved.env_steps + 2_000)
        result = train(more, resume_from=tmp_path)
        assert result.env_steps >= more.total_steps and result.updates > saved.updates
        n = len(saved.history.episode_returns)
        assert result.history.episode_returns[:n] == saved.history.episode_returns
        assert no_impala_processes() == []
