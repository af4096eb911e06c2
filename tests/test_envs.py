import numpy as np
import pytest

from rlkit.envs.evaluation import evaluate_policy
from rlkit.envs.make import make_env, space_dims
from rlkit.envs.runner import EnvRunner


def test_make_env_seeds_reproducibly():
    a, b = make_env("CartPole-v1", 3), make_env("CartPole-v1", 3)
    oa, _ = a.reset(seed=3)
    ob, _ = b.reset(seed=3)
    np.testing.assert_array_equal(oa, ob)
    assert a.action_space.sample() == b.action_space.sample()
    assert space_dims(a) == (4, 2)


def test_dqn_refuses_continuous_actions():
    with pytest.raises(ValueError, match="DQN needs a discrete action space.*Pendulum-v1"):
        make_env("Pendulum-v1", 0, "discrete", "DQN")


def test_sac_refuses_discrete_actions():
    with pytest.raises(ValueError, match="SAC needs a continuous"):
        make_env("CartPole-v1", 0, "continuous", "SAC")


def test_unknown_env_id_is_named():
    with pytest.raises(ValueError, match="env_id='CartPole-v9'.*registered"):
        make_env("CartPole-v9", 0)


def test_runner_marks_truncation_as_not_terminal():
    # Pendulum never terminates; its TimeLimit truncates every episode at 200 steps.
    runner = EnvRunner("Pendulum-v1", 0, "continuous")
    frag = runner.run(450, lambda obs: np.zeros((len(obs), 1), dtype=np.float32))
    assert frag.batch.terminations.sum() == 0.0
    assert frag.episode_lengths == [200, 200]
    # the stored next_obs at the cut is the real last state, not the reset observation
    assert not np.allclose(frag.batch.next_obs[199], frag.batch.obs[200])
    np.testing.assert_allclose(frag.batch.next_obs[:199], frag.batch.obs[1:200])


def test_runner_marks_termination_as_terminal():
    runner = EnvRunner("CartPole-v1", 0, "discrete")
    frag = runner.run(200, lambda obs: np.zeros(len(obs), np.int64))  # push left: falls fast
    ends = np.flatnonzero(frag.batch.terminations)
    assert len(ends) == len(frag.episode_lengths) >= 5
    assert np.diff(np.concatenate([[-1], ends])).tolist() == frag.episode_lengths[:len(ends)]
    assert sum(frag.episode_returns) == pytest.approx(sum(frag.episode_lengths))


def test_evaluate_policy_runs_full_episodes():
    returns = evaluate_policy(lambda obs: np.zeros(len(obs), dtype=np.int64), "CartPole-v1",
                              episodes=5, seed=10)
    assert returns.shape == (5,)
    assert ((returns >= 8) & (returns < 20)).all()  # pushing left only fails fast


def test_runner_steps_several_envs_in_lockstep():
    runner = EnvRunner("CartPole-v1", 5, "discrete", num_envs=3)
    seen = []

    def policy(obs):
        seen.append(obs.shape)
        return np.ones(len(obs), np.int64)

    frag = runner.run(40, policy)
    # one policy call per vector step, for all envs at once; a step in which some copy starts
    # a new episode (gymnasium's next-step autoreset) adds no row for it, so a few more
    # calls than 40 are needed for 120 transitions
    assert set(seen) == {(3, 4)} and 40 <= len(seen) <= 40 + len(frag.episode_lengths)
    assert 120 <= len(frag.batch) < 123
    # env j's rows are its consecutive steps: each row's next_obs is the next row's obs
    rows = np.flatnonzero(frag.batch_env_ids == 1)
    obs, nxt, ends = frag.batch.obs[rows], frag.batch.next_obs[rows], frag.batch_ends[rows]
    np.testing.assert_allclose(nxt[:-1][~ends[:-1]], obs[1:][~ends[:-1]])
    # the three envs start from different states
    assert not np.allclose(frag.batch.obs[0], frag.batch.obs[1])
