"""Every role of every pattern killed from outside mid-run (``kill_at``: ``ray.kill``, as a
crashed process looks to Ray), and the outcome asserted: a worker or the evaluator is replaced
and the run goes on; any other role (learner, parameter server, replay shard, gradient server,
trajectory queue) ends the run within 5 s with an error naming *that* role, not a role that
failed because of it, and without spending restarts on workers that could not help.

The roles the run can replace are killed first in the same run as a role it cannot, so each
pattern costs one or two short runs. Killing the learner of Ape-X, A3C/A2C and IMPALA, with
a checkpoint to resume from, is in test_resume.py; the off-policy learner's in test_faults.py."""

import time

import pytest

from conftest import wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.a2c import A2CConfig  # noqa: E402
from rlkit.algos.apex import ApexConfig, ApexDQN  # noqa: E402
from rlkit.algos.dqn import DQNConfig  # noqa: E402
from rlkit.algos.impala import IMPALAConfig  # noqa: E402
from rlkit.distributed.a3c.driver import train_a2c_ray, train_a3c_ray  # noqa: E402
from rlkit.distributed.apex.driver import train_apex_ray  # noqa: E402
from rlkit.distributed.impala.driver import train_impala_ray  # noqa: E402
from rlkit.distributed.off_policy.driver import train_dqn_ray  # noqa: E402
from rlkit.distributed.runtime.supervisor import (LearnerFailedError, RoleFailedError,  # noqa: E402
                                                  Supervisor)

pytestmark = pytest.mark.ray

DQN = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=300, total_steps=20_000,
                eval_every=400, eval_episodes=2, target_return=None)
APEX = ApexConfig(num_workers=2, num_shards=2, envs_per_worker=2, fragment_steps=40,
                  updates_per_call=8)
A2C = A2CConfig(envs_per_worker=4, n_steps=8, total_steps=50_000, eval_every=2_000,
                eval_episodes=2, target_return=None)
IMPALA = IMPALAConfig(envs_per_worker=4, unroll_length=16, batch_fragments=4, queue_size=8,
                      total_steps=200_000, eval_every=5_000, eval_episodes=2,
                      target_return=None)


@pytest.fixture
def kill_times(monkeypatch):
    """When each scheduled kill really happened (``time.perf_counter()``), by role."""
    times = {}
    original = Supervisor.inject_faults

    def recording(self, env_steps):
        due = [role for role, at in self.kill_at.items() if env_steps >= at]
        original(self, env_steps)
        times.update({role: time.perf_counter() for role in due})

    monkeypatch.setattr(Supervisor, "inject_faults", recording)
    return times


def apex(**options):
    return train_apex_ray(ApexDQN(DQN, APEX), **options)


# (pattern, run, kill_at: restartable roles first, then the one the run cannot replace)
CASES = [
    ("off-policy", lambda **o: train_dqn_ray(DQN, num_workers=2, **o),
     {"worker 1": 500, "evaluator": 700, "parameter server": 1500}),
    ("apex", apex, {"worker 0": 200, "evaluator": 500, "shard 1": 1200}),
    ("apex", apex, {"parameter server": 800}),
    ("a3c", lambda **o: train_a3c_ray(A2C, num_workers=2, **o),
     {"worker 1": 1000, "gradient server": 3000}),
    ("a2c", lambda **o: train_a2c_ray(A2C, num_workers=2, **o), {"gradient server": 2000}),
    ("impala", lambda **o: train_impala_ray(IMPALA, **o),
     {"worker 0": 2000, "trajectory queue": 6000}),
]


@pytest.mark.parametrize("pattern, run, kill_at", CASES,
                         ids=[f"{c[0]}: {', '.join(c[2])}" for c in CASES])
def test_killing_a_role_is_survived_or_named_within_5_s(ray_cluster, kill_times, pattern, run,
                                                        kill_at):
    *replaceable, fatal = kill_at
    expected = LearnerFailedError if fatal == "learner" else RoleFailedError
    with pytest.raises(expected, match=rf"^the {fatal} actor (failed|died)") as info:
        run(kill_at=kill_at, max_restarts=1)
    named_at = time.perf_counter()
    assert info.value.role == fatal
    assert set(kill_times) == set(kill_at)  # every kill happened (the replaceable ones first)
    assert named_at - kill_times[fatal] < 5.0
    # the killed workers and evaluator were replaced, and with max_restarts=1 a second restart
    # (spent on a worker that failed because a server died) would have raised a worker error
    assert all(r.startswith(("worker", "evaluator")) for r in replaceable)
    print(info.value)
    assert wait_until_no_actors() == []
