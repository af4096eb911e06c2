"""Every pattern's run survives losing its learner and a Ctrl-C, through its checkpoints:

1. the learner role is killed mid-run: the error names it and the checkpoint to resume from;
2. the run is resumed from there and stopped with Ctrl-C (the stop button): a newer
   checkpoint is saved, the interrupt goes through, and nothing is left running;
3. resumed again, the run solves CartPole (greedy evaluation >= 475), its history continuing
   the one the first run began.

The off-policy driver's own version of this is in test_faults.py."""

import dataclasses

import pytest

from conftest import wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.a2c import A2CConfig  # noqa: E402
from rlkit.algos.apex import ApexConfig, ApexDQN  # noqa: E402
from rlkit.algos.dqn import DQNConfig  # noqa: E402
from rlkit.algos.impala import IMPALAConfig  # noqa: E402
from rlkit.core.metrics import History  # noqa: E402
from rlkit.distributed.a3c.driver import train_a2c_ray, train_a3c_ray  # noqa: E402
from rlkit.distributed.apex.driver import train_apex_ray  # noqa: E402
from rlkit.distributed.impala.driver import train_impala_ray  # noqa: E402
from rlkit.distributed.runtime.supervisor import RoleFailedError  # noqa: E402
from rlkit.train.checkpoint import load_checkpoint  # noqa: E402

pytestmark = pytest.mark.ray

APEX_DQN = DQNConfig(eval_episodes=10)
APEX = ApexConfig(num_workers=1, num_shards=1, envs_per_worker=8)  # 5 actors: quicker to start
A2C = A2CConfig(eval_every=5_000, eval_episodes=10)
IMPALA = IMPALAConfig(envs_per_worker=8, eval_episodes=10)

# pattern: (run(**options), the learner role, the checkpoint's algorithm name, its config,
#           the env step at which the learner is killed, checkpoint_every in learner updates)
PATTERNS = {
    "apex": (lambda **o: train_apex_ray(ApexDQN(APEX_DQN, APEX), **o), "learner",
             "Ape-X DQN", APEX_DQN, 3_000, 200),
    "a3c": (lambda **o: train_a3c_ray(A2C, num_workers=2, **o), "gradient server", "A2C", A2C,
            5_000, 10),
    "a2c": (lambda **o: train_a2c_ray(A2C, num_workers=2, **o), "gradient server", "A2C", A2C,
            3_000, 5),
    "impala": (lambda **o: train_impala_ray(IMPALA, **o), "learner", "IMPALA", IMPALA, 40_000,
               5),
}


def press_stop_at_episode(monkeypatch, n):
    """A Ctrl-C in the driver when it logs its ``n``-th episode (counted over the history)."""
    original = History.log_episode

    def log_episode(self, *args):
        if len(self.episode_returns) + 1 == n:
            raise KeyboardInterrupt
        original(self, *args)

    monkeypatch.setattr(History, "log_episode", log_episode)


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_learner_failure_and_ctrl_c_are_resumed_and_the_run_solves(ray_cluster, tmp_path,
                                                                  monkeypatch, pattern):
    run, learner, algorithm, config, kill_step, every = PATTERNS[pattern]
    path = tmp_path / "checkpoint.pt"

    with pytest.raises(RoleFailedError, match=rf"^the {learner} actor (failed|died).*resume_from="
                                              rf"'{path}'") as info:
        run(checkpoint_dir=tmp_path, checkpoint_every=every, kill_at={learner: kill_step})
    assert info.value.role == learner
    assert wait_until_no_actors() == []
    first = load_checkpoint(path, algorithm, config)
    assert 0 < first.env_steps < 2 * kill_step and first.updates >= every

    press_stop_at_episode(monkeypatch, len(first.history.episode_returns) + 5)
    with pytest.raises(KeyboardInterrupt):
        run(checkpoint_dir=tmp_path, checkpoint_every=every, resume_from=tmp_path)
    monkeypatch.undo()
    assert wait_until_no_actors() == []
    second = load_checkpoint(path, algorithm, config)
    assert second.env_steps > first.env_steps and second.updates >= first.updates
    n = len(first.history.episode_returns)
    assert second.history.episode_returns[:n] == first.history.episode_returns
    assert len(second.history.episode_returns) == n + 4  # the 5th was being logged

    result = run(resume_from=tmp_path)
    assert result.solved and result.eval_return >= 475
    assert result.env_steps > second.env_steps
    assert result.history.episode_returns[:n] == first.history.episode_returns
    assert sum("resumed from" in e for e in result.history.events) == 2
    assert result.wall_seconds > second.wall_seconds  # the clock went on, too
    assert wait_until_no_actors() == []


def test_a_checkpoint_resumes_only_its_own_pattern_and_shapes(ray_cluster, tmp_path):
    """An IMPALA checkpoint refused by A3C, and by IMPALA with another network, before any
    actor starts."""
    run, *_ = PATTERNS["impala"]
    small = dataclasses.replace(IMPALA, total_steps=20_000, target_return=None)
    train_impala_ray(small, checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match=r"holds a IMPALA checkpoint, but this run trains A2C"):
        train_a3c_ray(A2C, resume_from=tmp_path)
    with pytest.raises(ValueError, match=r"was trained with hidden=\[64, 64\], but this config "
                                         r"has hidden=\[32\]"):
        train_impala_ray(dataclasses.replace(small, hidden=(32,)), resume_from=tmp_path)
    assert wait_until_no_actors() == []
