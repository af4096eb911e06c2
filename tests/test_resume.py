"""Every pattern's run survives losing its learner's node and a Ctrl-C, through its checkpoints.
On a cluster of a head and three 1-CPU nodes (the learner alone on one of them):

1. the learner's node is removed mid-run: within 5 s the error names the learner, its node and
   the checkpoint to resume from;
2. the run is resumed from there (on the nodes left) and stopped with Ctrl-C (the stop
   button): a newer checkpoint is saved, the interrupt goes through, nothing is left running;
3. resumed again, the run solves CartPole (greedy evaluation >= 475), its history continuing
   the one the first run began.

The off-policy driver's own version of this (a killed learner actor) is in test_faults.py."""

import dataclasses
import re

import pytest

from conftest import CLUSTER_IMPALA, NAMING_ALLOWANCE_S, wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.a2c import A2CConfig  # noqa: E402
from rlkit.algos.apex import ApexConfig, ApexDQN  # noqa: E402
from rlkit.algos.dqn import DQNConfig  # noqa: E402
from rlkit.core.metrics import History  # noqa: E402
from rlkit.distributed.a3c.driver import train_a2c_ray, train_a3c_ray  # noqa: E402
from rlkit.distributed.apex.driver import train_apex_ray  # noqa: E402
from rlkit.distributed.impala.driver import train_impala_ray  # noqa: E402
from rlkit.distributed.runtime.actor_state import PING_TIMEOUT_S  # noqa: E402
from rlkit.distributed.runtime.supervisor import RoleFailedError  # noqa: E402
from rlkit.train.checkpoint import load_checkpoint  # noqa: E402

pytestmark = pytest.mark.ray

# 5 actors: quicker to start
APEX_DQN = DQNConfig(eval_episodes=10, num_workers=1, envs_per_worker=8, fragment_steps=64)
APEX = ApexConfig(num_shards=1)
A2C = A2CConfig(eval_every=5_000, eval_episodes=10)
IMPALA = CLUSTER_IMPALA

# pattern: (run(**options), the learner role, the checkpoint's algorithm name, its config,
#           the env step at which the learner is killed, checkpoint_every in learner updates)
PATTERNS = {
    "apex": (lambda **o: train_apex_ray(ApexDQN(APEX_DQN, APEX), **o), "learner",
             "Ape-X DQN", APEX_DQN, 3_000, 200),
    "a3c": (lambda **o: train_a3c_ray(A2C, **o), "gradient server", "A2C", A2C,
            5_000, 10),  # worker 1 is killed first, at 1000 env steps, and replaced
    "a2c": (lambda **o: train_a2c_ray(A2C, **o), "gradient server", "A2C", A2C,
            3_000, 5),
    "impala": (lambda **o: train_impala_ray(IMPALA, **o), "learner", "IMPALA", IMPALA, 40_000,
               5),
}


def press_stop_at_learner_report(monkeypatch, n):
    """A Ctrl-C in the driver when it logs the ``n``-th learner loss of this run, or at its
    first evaluation if that comes sooner: early, after the learner has trained on. (Only an
    evaluation can end a run early; a resumed run that is already good solves at its first one,
    which came before the 3rd learner report in a fresh run of the suite: IMPALA's report covers
    8,192 env steps, and the first evaluation past 50k followed the first report.)"""
    loss, seen = History.log_loss, [0]

    def log_loss(self, *args):
        seen[0] += 1
        if seen[0] == n:
            raise KeyboardInterrupt
        loss(self, *args)

    def log_eval(self, *args):
        raise KeyboardInterrupt  # before it is recorded, so before it can solve the run

    monkeypatch.setattr(History, "log_loss", log_loss)
    monkeypatch.setattr(History, "log_eval", log_eval)


@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_learner_node_loss_and_ctrl_c_are_resumed_and_the_run_solves(nodes_cluster, tmp_path,
                                                                     monkeypatch, kill_times,
                                                                     named_times, pattern):
    """The learner's node lost: the error names the learner and its node within
    ``PING_TIMEOUT_S + NAMING_ALLOWANCE_S`` (5 s) of the loss (the supervisor's ping, and 3x
    the rest as measured on the 2-core VM; the teardown after it is not counted); a Ctrl-C
    after a resume saves again; the second resume solves."""
    run, learner, algorithm, config, kill_step, every = PATTERNS[pattern]
    path = tmp_path / "checkpoint.pt"
    kill_at = {"worker 1": 1_000} if pattern == "a3c" else {}
    nodes_cluster.refill()
    nodes_cluster.clear()
    nodes_cluster.remove_node_of(monkeypatch, learner, kill_step)

    with pytest.raises(RoleFailedError, match=rf"^the {learner} actor (failed|died) on node "
                                              rf".*resume_from='{path}'") as info:
        run(checkpoint_dir=tmp_path, checkpoint_every=every, kill_at=kill_at, max_restarts=1)
    node_id, removed_at = nodes_cluster.removed[learner]
    assert info.value.role == learner and set(kill_times) == set(kill_at)
    assert re.search(rf"node {node_id[:8]} \([^)]+\)", str(info.value)), str(info.value)
    print(f"{learner} named {named_times[learner] - removed_at:.2f} s after its node was lost")
    assert named_times[learner] - removed_at < PING_TIMEOUT_S + NAMING_ALLOWANCE_S
    assert wait_until_no_actors() == []
    first = load_checkpoint(path, algorithm, config)
    assert 0 < first.env_steps < 2 * kill_step and first.updates >= every

    press_stop_at_learner_report(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        run(checkpoint_dir=tmp_path, checkpoint_every=every, resume_from=tmp_path)
    monkeypatch.undo()  # (the kill_times fixture's patch too: no more kills are planned)
    assert wait_until_no_actors() == []
    second = load_checkpoint(path, algorithm, config)
    assert second.env_steps > first.env_steps and second.updates > first.updates
    # one or two reports logged: the 3rd, or the first evaluation, stopped it
    assert len(first.history.losses) < len(second.history.losses) <= len(first.history.losses) + 2
    n = len(first.history.episode_returns)
    assert second.history.episode_returns[:n] == first.history.episode_returns

    result = run(resume_from=tmp_path)
    assert result.solved and result.eval_return >= 475
    assert result.env_steps > second.env_steps
    assert result.history.episode_returns[:n] == first.history.episode_returns
    assert sum("resumed from" in e for e in result.history.events) == 2
    assert result.wall_seconds > second.wall_seconds  # the clock went on, too
    assert wait_until_no_actors() == []


def test_a_checkpoint_resumes_only_its_own_pattern_and_shapes(nodes_cluster, tmp_path):
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
