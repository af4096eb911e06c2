"""The catalogue of bad inputs: each one fails fast with an error that names the field (or the
object) and says how to fix it, and leaves nothing running. Runs under a real local Ray cluster
(2 CPUs, no GPU) so the cluster-sized checks are real."""

import dataclasses

import pytest

from conftest import wait_until_no_actors

ray = pytest.importorskip("ray")

from rlkit.algos.dqn import DQNConfig, DQNLearner  # noqa: E402
from rlkit.algos.sac import SACConfig  # noqa: E402
from rlkit.core.metrics import History  # noqa: E402
from rlkit.distributed.off_policy.driver import train_dqn_ray, train_sac_ray  # noqa: E402
from rlkit.train import train_dqn, train_sac  # noqa: E402
from rlkit.train.checkpoint import save_checkpoint  # noqa: E402

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
    ("more workers than the cluster has", lambda ck: train_dqn_ray(SMALL, num_workers=40),
     ValueError, r"num_workers=40 is too many for a cluster of 2 CPUs.*Fix: use at most 20"),
    ("no workers", lambda ck: train_dqn_ray(SMALL, num_workers=0), ValueError,
     r"num_workers=0 must be an int >= 1. Fix:"),
    ("a GPU the cluster lacks", lambda ck: train_sac_ray(SACConfig(), learner_gpus=1),
     ValueError, r"learner_gpus=1 but the cluster has 0 GPUs. Fix:"),
    ("a buffer that does not fit in memory", lambda ck: train_dqn_ray(dataclasses.replace(
        SMALL, buffer_size=10**10)), ValueError,
     r"buffer_size=10000000000 would need 447.0 GiB on cpu.*Fix: use buffer_size <= "),
    ("the same, single process", lambda ck: train_sac(SACConfig(buffer_size=10**10)),
     ValueError, r"buffer_size=10000000000 would need .* GiB.*Fix: use buffer_size <= "),
    ("zero fragment size", lambda ck: train_dqn_ray(SMALL, fragment_steps=0), ValueError,
     r"fragment_steps=0 must be an int >= 1. Fix:"),
    ("zero timeout", lambda ck: train_dqn_ray(SMALL, timeout_s=0), ValueError,
     r"timeout_s=0 must be a finite number > 0 \(seconds\). Fix:"),
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
]


@pytest.mark.parametrize("case, call, error, pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_input_fails_clearly_and_leaves_nothing_running(ray_cluster, dqn_checkpoint,
                                                            case, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(dqn_checkpoint)
    assert wait_until_no_actors() == []
