"""The catalogue of bad inputs: each one fails fast with an error that names the field (or the
object) and says how to fix it, and leaves nothing running. Runs under a real local Ray cluster
(2 CPUs, no GPU) so the cluster-sized checks are real."""

import dataclasses
import time

import pytest

from conftest import wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.a2c import A2CConfig  # noqa: E402
from rlkit.algos.apex import ApexConfig, ApexDQN  # noqa: E402
from rlkit.algos.dqn import DQNConfig, DQNLearner  # noqa: E402
from rlkit.algos.impala import IMPALAConfig  # noqa: E402
from rlkit.algos.sac import SACConfig  # noqa: E402
from rlkit.core.metrics import History  # noqa: E402
from rlkit.distributed.a3c.driver import train_a2c, train_a2c_ray, train_a3c_ray  # noqa: E402
from rlkit.distributed.apex.driver import train_apex_ray  # noqa: E402
from rlkit.distributed.impala.driver import train_impala_ray  # noqa: E402
from rlkit.distributed.off_policy.driver import train_dqn_ray, train_sac_ray  # noqa: E402
from rlkit.testing.faulty_envs import UNBOUNDED_PENDULUM  # noqa: E402
from rlkit.train import train_dqn, train_sac  # noqa: E402
from rlkit.train.checkpoint import save_checkpoint  # noqa: E402
from rlkit.train.impala import train_impala  # noqa: E402

pytestmark = pytest.mark.ray

SMALL = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=200, total_steps=1000,
                  eval_every=500, eval_episodes=2, target_return=None)


@pytest.fixture(scope="module")
def dqn_checkpoint(tmp_path_factory):
    """A DQN checkpoint of SMALL's shape (hidden 32x32, CartPole)."""
    folder = tmp_path_factory.mktemp("dqn_checkpoint")
    learner = DQNLearner(4, 2, SMALL)
    save_checkpoint(folder, "DQN", SMALL, learner.state_dict(), None, 500, 1.0, History())
    return folder


# (case, call(checkpoint folder), exception, regex the message must match)
CASES = [
    ("negative learning rate", lambda ck: DQNConfig(learning_rate=-1e-3), ValueError,
     r"learning_rate=-0.001 must be a finite number > 0. Fix:"),
    ("NaN learning rate", lambda ck: SACConfig(critic_lr=float("nan")), ValueError,
     r"critic_lr=nan must be a finite number > 0. Fix:"),
    ("zero batch size", lambda ck: DQNConfig(batch_size=0), ValueError,
     r"batch_size=0 must be an int >= 1. Fix:"),
    ("float step budget", lambda ck: DQNConfig(total_steps=1e5), ValueError,
     r"total_steps=100000.0 must be an int >= 1. Fix:"),
    ("discount of 1", lambda ck: SACConfig(gamma=1.0), ValueError,
     r"gamma=1.0 must be a finite number in \[0, 1\). Fix:"),
    ("epsilon above 1", lambda ck: DQNConfig(epsilon_start=1.5), ValueError,
     r"epsilon_start=1.5 must be a finite number in \[0, 1\] \(a probability\). Fix:"),
    ("empty network", lambda ck: SACConfig(hidden=()), ValueError,
     r"hidden=\(\) must be a non-empty tuple of positive ints. Fix:"),
    ("batch larger than the buffer", lambda ck: DQNConfig(buffer_size=32, batch_size=64,
                                                          learning_starts=64), ValueError,
     r"batch_size=64 is larger than buffer_size=32. Fix:"),
    ("warm-up past the budget", lambda ck: SACConfig(total_steps=500), ValueError,
     r"learning_starts=1000 is not below total_steps=500.*Fix:"),
    ("unknown env id", lambda ck: DQNConfig(env_id="CartPole-v9"), ValueError,
     r"env_id='CartPole-v9' is not a registered gymnasium environment.*Fix:"),
    ("DQN on a continuous-action env", lambda ck: train_dqn(dataclasses.replace(
        SMALL, env_id="Pendulum-v1")), ValueError,
     r"DQN needs a discrete action space, but Pendulum-v1 has Box.*Fix:"),
    ("SAC on a discrete-action env, under Ray", lambda ck: train_sac_ray(
        SACConfig(env_id="CartPole-v1")), ValueError,
     r"SAC needs a continuous \(1-D Box\) action space, but CartPole-v1 has Discrete.*Fix:"),
    ("SAC on an unbounded action box, under Ray", lambda ck: train_sac_ray(
        SACConfig(env_id=UNBOUNDED_PENDULUM)), ValueError,
     r"the action box low=\[-inf\], high=\[inf\] is unbounded.*Fix: wrap the env"),
    ("more workers than the cluster has", lambda ck: train_dqn_ray(dataclasses.replace(
        SMALL, num_workers=40)),
     ValueError, r"num_workers=40 is too many for a cluster of 1 node of 2 CPUs.*Fix: use at "
     r"most 20"),
    ("no workers", lambda ck: train_dqn_ray(dataclasses.replace(SMALL, num_workers=0)), ValueError,
     r"num_workers=0 must be an int >= 1. Fix:"),
    ("a GPU the cluster lacks", lambda ck: train_sac_ray(SACConfig(), learner_gpus=1),
     ValueError, r"learner_gpus=1 but no node has that many GPUs free.*Fix:"),
    ("a buffer that does not fit in memory", lambda ck: train_dqn_ray(dataclasses.replace(
        SMALL, buffer_size=10**10)), ValueError,
     r"buffer_size=10000000000 would need 447.0 GiB on cpu.*Fix: use buffer_size <= "),
    ("the same, single process", lambda ck: train_sac(SACConfig(buffer_size=10**10)),
     ValueError, r"buffer_size=10000000000 would need .* GiB.*Fix: use buffer_size <= "),
    ("zero fragment size", lambda ck: train_dqn_ray(dataclasses.replace(
        SMALL, fragment_steps=0)), ValueError,
     r"fragment_steps=0 must be an int >= 1. Fix:"),
    ("zero timeout", lambda ck: train_dqn_ray(SMALL, timeout_s=0), ValueError,
     r"timeout_s=0 must be a finite number >= 1 \(seconds\). Fix:"),
    ("zero checkpoint interval", lambda ck: train_dqn(SMALL, checkpoint_dir=ck,
                                                      checkpoint_every=0), ValueError,
     r"checkpoint_every=0 must be an int >= 1.*Fix:"),
    ("resume from a missing checkpoint", lambda ck: train_dqn_ray(
        SMALL, resume_from=ck / "nope"), FileNotFoundError,
     r"resume_from=.*nope.*no checkpoint file.*Fix:"),
    ("resume SAC from a DQN checkpoint", lambda ck: train_sac(SACConfig(), resume_from=ck),
     ValueError, r"holds a DQN checkpoint, but this run trains SAC. Fix:"),
    ("resume with another network shape", lambda ck: train_dqn_ray(dataclasses.replace(
        SMALL, hidden=(64, 64)), resume_from=ck), ValueError,
     r"was trained with hidden=\[32, 32\], but this config has hidden=\[64, 64\]. Fix:"),
    ("resume on another env", lambda ck: train_dqn(dataclasses.replace(
        SMALL, env_id="Acrobot-v1"), resume_from=ck), ValueError,
     r"was trained with env_id='CartPole-v1', but this config has env_id='Acrobot-v1'"),
    # the newer drivers (issue 24): the wrong config type, an unknown option, bad arguments
    ("Ape-X given a bare DQNConfig", lambda ck: train_apex_ray(SMALL), TypeError,
     r"train_apex_ray takes an Ape-X algorithm \(an ApexAlgorithm: .*got DQNConfig, which "
     r"lacks name, .*apex, ladder, .*Fix: train_apex_ray\(ApexDQN\("),
    ("IMPALA given an A2CConfig", lambda ck: train_impala_ray(A2CConfig()), TypeError,
     r"train_impala_ray takes an IMPALAConfig as config, got A2CConfig. Fix:"),
    ("A3C given an IMPALAConfig", lambda ck: train_a3c_ray(IMPALAConfig()), TypeError,
     r"train_a3c_ray takes an A2CConfig as config, got IMPALAConfig. Fix:"),
    ("A2C given a DQNConfig", lambda ck: train_a2c_ray(SMALL), TypeError,
     r"train_a2c_ray takes an A2CConfig as config, got DQNConfig. Fix:"),
    ("DQN under Ray given a SACConfig", lambda ck: train_dqn_ray(SACConfig()), TypeError,
     r"train_dqn_ray takes a DQNConfig as config, got SACConfig. Fix:"),
    ("SAC under Ray given a DQNConfig", lambda ck: train_sac_ray(SMALL), TypeError,
     r"train_sac_ray takes a SACConfig as config, got DQNConfig. Fix:"),
    ("a misspelt Ape-X option", lambda ck: train_apex_ray(ApexDQN(SMALL), timeout=5), TypeError,
     r"train_apex_ray got an unknown option 'timeout'. Fix: did you mean 'timeout_s'\?"),
    ("a misspelt IMPALA option", lambda ck: train_impala_ray(IMPALAConfig(), max_restart=1),
     TypeError, r"got an unknown option 'max_restart'. Fix: did you mean 'max_restarts'\?"),
    ("a misspelt off-policy option", lambda ck: train_dqn_ray(SMALL, checkpoint_dr=ck),
     TypeError, r"got an unknown option 'checkpoint_dr'. Fix: did you mean 'checkpoint_dir'"),
    ("NaN timeout for Ape-X", lambda ck: train_apex_ray(ApexDQN(SMALL), timeout_s=float("nan")),
     ValueError, r"timeout_s=nan must be a finite number >= 1 \(seconds\). Fix:"),
    ("string timeout for IMPALA", lambda ck: train_impala_ray(IMPALAConfig(), timeout_s="60"),
     ValueError, r"timeout_s='60' must be a finite number >= 1 .*\(got a str\). Fix:"),
    ("bool restarts for A3C", lambda ck: train_a3c_ray(A2CConfig(), max_restarts=True),
     ValueError, r"max_restarts=True must be an int >= 0 \(got a bool\). Fix:"),
    ("A3C with no workers", lambda ck: train_a3c_ray(A2CConfig(num_workers=0)), ValueError,
     r"num_workers=0 must be an int >= 1. Fix:"),
    ("A2C with a string worker count", lambda ck: train_a2c_ray(A2CConfig(num_workers="2")),
     ValueError, r"num_workers='2' must be an int >= 1 \(got a str\). Fix:"),
    ("A3C with a zero step budget", lambda ck: train_a3c_ray(A2CConfig(total_steps=0)),
     ValueError, r"total_steps=0 must be an int >= 1. Fix:"),
    ("A3C with one env id where a list is meant", lambda ck: train_a3c_ray(A2CConfig(
        worker_env_ids="CartPole-v1")), ValueError, r"worker_env_ids='CartPole-v1' must be a list "
     r"holding an env id \(str\) or None per worker or None \(got a str\). Fix: use e.g. "
     r"worker_env_ids="),
    ("A3C worker on an unknown env", lambda ck: train_a3c_ray(
        A2CConfig(worker_env_ids=[None, "CartPole-v9"])), ValueError,
     r"env_id='CartPole-v9' is not a registered gymnasium environment.*Fix:"),
    ("A3C worker on a continuous env", lambda ck: train_a3c_ray(
        A2CConfig(worker_env_ids=[None, "Pendulum-v1"])), ValueError,
     r"A2C needs a discrete action space, but Pendulum-v1 has Box.*Fix:"),
    ("A3C worker on an env of other shapes", lambda ck: train_a2c_ray(
        A2CConfig(worker_env_ids=[None, "Acrobot-v1"])), ValueError,
     r"worker_env_ids has 'Acrobot-v1', whose spaces \(6, 3\) differ.*Fix:"),
    ("A3C env ids for the wrong worker count", lambda ck: train_a3c_ray(
        A2CConfig(worker_env_ids=["CartPole-v1"])), ValueError,
     r"worker_env_ids=\['CartPole-v1'\] has 1 entries for num_workers=2. Fix:"),
    ("IMPALA with more workers than the cluster holds", lambda ck: train_impala_ray(
        IMPALAConfig(num_workers=40)), ValueError,
     r"num_workers=40 is too many for a cluster of 1 node of 2 CPUs.*Fix: use at most 20 workers"),
    ("Ape-X workers beside shards past the cluster", lambda ck: train_apex_ray(ApexDQN(
        dataclasses.replace(SMALL, num_workers=20), ApexConfig(num_shards=2))), ValueError,
     r"num_workers=20 beside 2 shards is too many.*Fix: use at most 18 workers beside 2 shards"),
    ("a checkpoint folder inside a file", lambda ck: train_dqn_ray(
        SMALL, checkpoint_dir=ck / "checkpoint.pt" / "sub"), ValueError,
     r"checkpoint_dir=.*sub' is inside .*checkpoint.pt, which is a file.*Fix:"),
    ("a misspelt DQN option, named under train_dqn_ray", lambda ck: train_dqn_ray(
        SMALL, check_point_dir=ck), TypeError,
     r"^train_dqn_ray got an unknown option 'check_point_dir'. Fix: did you mean"),
    ("single-process DQN given a SACConfig", lambda ck: train_dqn(SACConfig()), TypeError,
     r"train_dqn takes a DQNConfig as config, got SACConfig. Fix:"),
    ("single-process SAC given a DQNConfig", lambda ck: train_sac(SMALL), TypeError,
     r"train_sac takes a SACConfig as config, got DQNConfig. Fix:"),
    ("a string for progress", lambda ck: train_dqn(SMALL, progress="yes"), ValueError,
     r"progress='yes' must be True or False \(got a str\). Fix:"),
    ("single-process A2C given an IMPALAConfig", lambda ck: train_a2c(IMPALAConfig()),
     TypeError, r"train_a2c takes an A2CConfig as config, got IMPALAConfig. Fix:"),
    ("single-process A2C with no steps", lambda ck: train_a2c(A2CConfig(total_steps=0)),
     ValueError, r"total_steps=0 must be an int >= 1. Fix:"),
    ("single-process IMPALA given an A2CConfig", lambda ck: train_impala(A2CConfig()),
     TypeError, r"train_impala takes an IMPALAConfig as config, got A2CConfig. Fix:"),
    ("a negative simulated lag", lambda ck: train_impala(IMPALAConfig(), policy_lag=-1),
     ValueError, r"policy_lag=-1 must be an int >= 0. Fix:"),
    ("a bool simulated lag", lambda ck: train_impala(IMPALAConfig(), policy_lag=True),
     ValueError, r"policy_lag=True must be an int >= 0 \(got a bool\). Fix:"),
    ("an Ape-X replay too big for memory, counted over its shards and trees",
     lambda ck: train_apex_ray(ApexDQN(dataclasses.replace(SMALL, buffer_size=10**9))),
     ValueError, r"buffer_size=1000000000 \(in 2 shards, with their priority trees\) would "
                 r"need 6[0-9].[0-9] GiB on cpu.*Fix: use buffer_size <= "),
    ("Ape-X with a role that does not exist", lambda ck: train_apex_ray(
        ApexDQN(SMALL), kill_at={"queue": 10}), ValueError,
     r"kill_at=\{'queue': 10\} names \['queue'\], which this run does not start. Fix:"),
]


@pytest.mark.parametrize("case, call, error, pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_input_fails_clearly_and_leaves_nothing_running(ray_cluster, dqn_checkpoint,
                                                            case, call, error, pattern):
    begin = time.perf_counter()
    with pytest.raises(error, match=pattern):
        call(dqn_checkpoint)
    assert time.perf_counter() - begin < 1.0  # refused at once (~10 ms), not after start-up
    assert wait_until_no_actors() == []
