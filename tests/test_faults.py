"""Faults injected under a real local Ray cluster (2 CPUs): each one is survived or stopped
with an error naming the role, and nothing is left running."""

import dataclasses
import time

import numpy as np
import pytest

from conftest import assert_same_tree, stop_pressed_twice, wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.dqn import DQNConfig  # noqa: E402
from rlkit.core.metrics import History  # noqa: E402
from rlkit.distributed.off_policy.driver import LearnerFailedError, train_dqn_ray  # noqa: E402
from rlkit.distributed.runtime.supervisor import RoleFailedError  # noqa: E402
from rlkit.testing.faulty_envs import (CRASHING, HANGING, HUGE_REWARD, NAN_REWARD,  # noqa: E402
                                       UNBUILDABLE_IN_ACTORS)
from rlkit.train import train_dqn  # noqa: E402
from rlkit.train.checkpoint import load_checkpoint  # noqa: E402

pytestmark = pytest.mark.ray

CFG = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=500, total_steps=3000,
                eval_every=1000, eval_episodes=2, target_return=None)


def test_killed_learner_names_itself_and_the_checkpoint_and_resume_works(ray_cluster, tmp_path):
    with pytest.raises(LearnerFailedError, match="learner actor failed") as info:
        train_dqn_ray(CFG, checkpoint_dir=tmp_path, checkpoint_every=200, kill_at={"learner": 2000})
    path = tmp_path / "checkpoint.pt"
    assert f"resume_from={str(path)!r}" in str(info.value)
    assert wait_until_no_actors() == []
    saved = load_checkpoint(path, "DQN", CFG)
    assert 500 < saved.env_steps <= 2100 and saved.updates > 0

    result = train_dqn_ray(CFG, resume_from=path)
    assert result.env_steps == 3000
    assert result.updates == saved.updates + (3000 - saved.env_steps) // 2  # buffer restored
    n = len(saved.history.episode_returns)
    assert result.history.episode_returns[:n] == saved.history.episode_returns
    assert any("resumed from" in e for e in result.history.events)
    assert wait_until_no_actors() == []


def test_env_that_raises_inside_a_worker_is_restarted_and_named(ray_cluster):
    # each CrashingCartPole instance raises at its 600th step: every worker fails, is
    # restarted with a fresh env, and training still collects its whole budget
    cfg = dataclasses.replace(CFG, env_id=CRASHING)
    result = train_dqn_ray(cfg, max_restarts=5)
    assert result.env_steps == 3000 and result.worker_restarts >= 2
    failures = [e for e in result.history.events if "failed" in e]
    assert len(failures) == result.worker_restarts
    assert all("RuntimeError: FaultyCartPole: injected crash at step 600" in e
               for e in failures)
    assert {e.split("worker ")[1].split()[0] for e in failures} == {"0", "1"}
    assert wait_until_no_actors() == []


def test_env_that_always_crashes_gives_up_after_max_restarts(ray_cluster):
    cfg = dataclasses.replace(CFG, env_id=CRASHING, total_steps=20_000)
    with pytest.raises(RuntimeError, match="worker 0 failed 2 times.*injected crash"):
        train_dqn_ray(dataclasses.replace(cfg, num_workers=1, fragment_steps=1000), max_restarts=1)
    assert wait_until_no_actors() == []


def test_a_role_that_dies_while_starting_is_named_with_its_node(ray_cluster):
    """An env the driver can build but the actors cannot (a ROM or a library missing on the
    workers' machines): the first role found dead while starting is named (with its node, where
    that is not the driver's) with the env's own error, through the same failure path as a role
    that dies later; not as Ray's raw ``ActorDiedError`` traceback."""
    cfg = dataclasses.replace(CFG, env_id=UNBUILDABLE_IN_ACTORS)
    with pytest.raises(RoleFailedError, match=r"^the (learner|worker \d|evaluator) actor failed "
                                              r"while starting \(ActorDiedError: RuntimeError: "
                                              r"FaultyCartPole: cannot be built in this actor "
                                              r"\(injected\)\); no checkpoint was written") as info:
        train_dqn_ray(dataclasses.replace(cfg, num_workers=1))
    assert info.value.role in ("learner", "worker 0", "evaluator")
    assert wait_until_no_actors() == []


def test_killed_evaluator_is_restarted_and_training_goes_on(ray_cluster):
    result = train_dqn_ray(CFG, kill_at={"evaluator": 1500})
    assert result.env_steps == 3000 and result.evaluator_restarts == 1
    assert any("evaluator failed" in e for e in result.history.events)
    assert result.history.eval_steps[-1] == 3000 and len(result.history.eval_steps) >= 2
    assert wait_until_no_actors() == []


def test_non_finite_loss_stops_the_learner_with_its_metrics(ray_cluster):
    # rewards of 3e38 are finite (the workers pass them on) but their squared errors are not
    cfg = dataclasses.replace(CFG, env_id=HUGE_REWARD, learning_starts=200, huber=False)
    with pytest.raises(FloatingPointError, match=r"learner stopped .*loss became inf .*largest "
                                                 r"\|reward\| in the batch 3e\+38"):
        train_dqn_ray(dataclasses.replace(cfg, num_workers=1))
    assert wait_until_no_actors() == []


def test_a_nan_reward_stops_the_run_naming_the_worker_and_the_env_not_the_learner(ray_cluster):
    """A worker is not restarted for it: its env would return the same NaN again."""
    cfg = dataclasses.replace(CFG, env_id=NAN_REWARD, learning_starts=200)
    with pytest.raises(FloatingPointError, match=r"the worker 0 stopped .*NaNRewardCartPole-v1 "
                                                 r"returned nan in its reward.*Fix: correct the "
                                                 r"environment"):
        train_dqn_ray(dataclasses.replace(cfg, num_workers=1))
    assert wait_until_no_actors() == []


def test_hanging_env_surfaces_as_a_timeout_naming_the_workers(ray_cluster):
    cfg = dataclasses.replace(CFG, env_id=HANGING)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"worker 0 did not answer within timeout_s=5.0 s "
                                           r"\(waiting after \d+ env steps\)"):
        train_dqn_ray(dataclasses.replace(cfg, num_workers=1), timeout_s=5.0)
    assert time.monotonic() - start < 60  # start-up + the 300 steps + 5 s, never an hour
    assert wait_until_no_actors() == []


class _StopPressed(Exception):
    pass


def _press_stop_at_episode(monkeypatch, n):
    """Raise KeyboardInterrupt inside the driver loop at the n-th logged episode, as a
    learner pressing the notebook's stop button would."""
    original = History.log_episode
    count = {"n": 0}

    def log_episode(self, *args):
        count["n"] += 1
        if count["n"] == n:
            raise KeyboardInterrupt
        original(self, *args)

    monkeypatch.setattr(History, "log_episode", log_episode)


def test_keyboard_interrupt_saves_a_checkpoint_and_stops_every_actor(ray_cluster, tmp_path,
                                                                      monkeypatch):
    _press_stop_at_episode(monkeypatch, 60)
    with pytest.raises(KeyboardInterrupt):
        train_dqn_ray(dataclasses.replace(CFG, total_steps=20_000), checkpoint_dir=tmp_path)
    assert wait_until_no_actors() == []
    saved = load_checkpoint(tmp_path, "DQN", CFG)
    assert 0 < saved.env_steps < 20_000 and len(saved.history.episode_returns) == 59
    monkeypatch.undo()
    # the session is still usable: the next run (resumed from the interrupt) works
    result = train_dqn_ray(dataclasses.replace(CFG, total_steps=saved.env_steps + 500,
                                               num_workers=1), resume_from=tmp_path)
    assert result.env_steps == saved.env_steps + 500
    assert wait_until_no_actors() == []


@pytest.mark.parametrize("gap_ms", [0, 50, 300])
def test_two_presses_of_stop_in_a_ray_run_leave_a_checkpoint_or_say_none_was_saved(
        ray_cluster, tmp_path, monkeypatch, capsys, gap_ms):
    """Stop pressed twice, ``gap_ms`` apart, while DQN on Ray saves its checkpoint (made to
    take 0.4 s: :func:`conftest.stop_pressed_twice`): the checkpoint is written and loads, or
    a printed line says none was saved; either way every actor is stopped. (The one-process
    loop, at six gaps: tests/test_checkpoint.py.)"""
    stop_pressed_twice(monkeypatch, gap_ms, lambda: train_dqn_ray(
        dataclasses.replace(CFG, num_workers=1, total_steps=20_000), checkpoint_dir=tmp_path))
    assert wait_until_no_actors() == []
    out = capsys.readouterr().out
    if "checkpoint saved to" in out:
        assert load_checkpoint(tmp_path, "DQN", CFG).env_steps > 0
    else:
        assert "no checkpoint saved" in out, out


def test_keyboard_interrupt_in_the_single_process_loop_saves_a_checkpoint(tmp_path,
                                                                          monkeypatch):
    _press_stop_at_episode(monkeypatch, 30)
    with pytest.raises(KeyboardInterrupt):
        train_dqn(CFG, checkpoint_dir=tmp_path)
    saved = load_checkpoint(tmp_path, "DQN", CFG)
    assert len(saved.history.episode_returns) == 29 and saved.env_steps > 0
    assert np.isfinite(saved.history.episode_returns).all()


def test_a_single_process_checkpoint_resumes_under_ray(ray_cluster, tmp_path):
    first = train_dqn(dataclasses.replace(CFG, total_steps=1000), checkpoint_dir=tmp_path)
    result = train_dqn_ray(dataclasses.replace(CFG, num_workers=1), resume_from=tmp_path)
    assert result.env_steps == 3000
    assert result.updates == first.learner.updates + (3000 - 1000) // 2  # buffer restored
    n = len(first.history.episode_returns)
    assert result.history.episode_returns[:n] == first.history.episode_returns
    assert wait_until_no_actors() == []


def _ray_resumes():
    from rlkit.algos.a2c import A2CConfig
    from rlkit.algos.apex import ApexConfig, ApexDQN
    from rlkit.algos.impala import IMPALAConfig
    from rlkit.distributed.a3c.driver import train_a3c_ray
    from rlkit.distributed.apex.driver import train_apex_ray
    from rlkit.distributed.impala.driver import train_impala_ray

    small = dict(total_steps=2_048, eval_every=2_048, eval_episodes=1, target_return=None)
    impala = dict(num_workers=1, envs_per_worker=4, batch_fragments=2, unroll_length=64)
    dqn = dataclasses.replace(CFG, learning_starts=200, total_steps=1_000, eval_every=1_000,
                              eval_episodes=1)
    return {  # pattern: (the checkpoint's algorithm, its config, run(**options))
        "dqn": ("DQN", dqn, lambda **o: train_dqn_ray(dataclasses.replace(dqn, num_workers=1),
                                                      **o)),
        "apex": ("Ape-X DQN", dqn, lambda **o: train_apex_ray(ApexDQN(dataclasses.replace(
            dqn, num_workers=1, envs_per_worker=4, fragment_steps=64), ApexConfig(num_shards=1)),
            **o)),
        "a3c": ("A2C", A2CConfig(**small),
                lambda **o: train_a3c_ray(A2CConfig(**small, num_workers=1), **o)),
        "impala": ("IMPALA", IMPALAConfig(**small, **impala),
                   lambda **o: train_impala_ray(IMPALAConfig(**small, **impala), **o)),
    }


@pytest.mark.parametrize("pattern", ["dqn", "apex", "a3c", "impala"])
def test_a_ray_resume_restores_every_part_its_checkpoint_holds(ray_cluster, tmp_path, pattern):
    """What a Ray driver's resume restores (rlkit.train.checkpoint's docstring says what, and
    why the envs and random streams are not among it): the learner (networks, optimiser,
    update count), the replay buffer with its sampling stream where the pattern saves one, the
    env steps, the clock and the history. A run resumed at the end of its budget has nothing
    left to train: it loads the checkpoint into freshly started roles and saves them again, so
    every part must come back unchanged, through the actors. (PPO and APPO resume through
    IMPALA's driver and learner role.)"""
    algorithm, config, run = _ray_resumes()[pattern]
    run(checkpoint_dir=tmp_path / "first")
    run(checkpoint_dir=tmp_path / "again", resume_from=tmp_path / "first")
    first = load_checkpoint(tmp_path / "first", algorithm, config)
    again = load_checkpoint(tmp_path / "again", algorithm, config)
    assert (again.env_steps, again.updates) == (first.env_steps, first.updates) and first.updates
    assert_same_tree(first.learner, again.learner, "learner")
    assert_same_tree(first.buffer, again.buffer, "buffer")
    assert (first.buffer is not None) == (pattern == "dqn")  # Ape-X's shards are not saved
    assert again.wall_seconds >= first.wall_seconds  # the clock goes on from the checkpoint's
    assert again.history.events == [*first.history.events,
                                    f"step {first.env_steps}: resumed from {first.path}"]
    for field in ("episode_steps", "episode_returns", "eval_steps", "eval_returns", "losses"):
        assert getattr(again.history, field) == getattr(first.history, field), field
    assert first.run_state is None  # a Ray driver saves none (see above)
    if pattern == "impala":  # and one process resumes it, with new episodes
        from rlkit.train.impala import train_impala

        here = train_impala(config, resume_from=tmp_path / "first")
        assert here.updates == first.updates and "holds no run state" in here.history.events[-1]
    assert wait_until_no_actors() == []
