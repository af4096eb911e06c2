import re
import sys
from pathlib import Path

import numpy as np
import pytest

from rlkit.envs.evaluation import evaluate_policy
from rlkit.envs.finite import NonFiniteEnvOutput, check_env_output
from rlkit.envs.make import make_env, space_dims
from rlkit.envs.runner import EnvRunner
from rlkit.testing import faulty_envs


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


def test_the_readmes_own_environment_trains_by_its_module_and_id(tmp_path, monkeypatch):
    """README, "Your own environment": its two code blocks run as written (``train_dqn`` given
    a short budget: the route, not the score): ``my_envs.py`` on the path, the
    ``"my_envs:ShortCartPole-v0"`` id trains DQN in one process; before the module is imported,
    the bare id is refused with an error that names the route."""
    import dataclasses

    import gymnasium as gym

    import rlkit.train
    from rlkit.algos import DQNConfig

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("**Your own environment.**"):]
    module, use = re.findall(r"```python\n(.*?)```", section, re.S)[:2]
    gym.registry.pop("ShortCartPole-v0", None)  # (a rerun in one process)
    with pytest.raises(ValueError, match=r"'my_package.my_envs:ShortCartPole-v0'"):
        make_env("ShortCartPole-v0", 0)
    (tmp_path / "my_envs.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    real, given = rlkit.train.train_dqn, []

    def short(config, **options):
        given.append(config)
        return real(dataclasses.replace(config, total_steps=600, learning_starts=200,
                                        eval_every=600, eval_episodes=1), **options)

    monkeypatch.setattr(rlkit.train, "train_dqn", short)
    try:
        exec(use, namespace := {})
        assert given == [DQNConfig(env_id="my_envs:ShortCartPole-v0", target_return=195.0)]
    finally:
        gym.registry.pop("ShortCartPole-v0", None)
        sys.modules.pop("my_envs", None)
    assert namespace["result"].env_steps == 600


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


@pytest.mark.parametrize("env_id, what", [(faulty_envs.NAN_REWARD, "reward"),
                                          (faulty_envs.NAN_OBSERVATION, "observation")])
def test_runner_refuses_a_non_finite_env_output_naming_the_env_and_the_copy(env_id, what):
    runner = EnvRunner(env_id, 0, "discrete", num_envs=3)
    zeros = lambda obs: np.zeros(len(obs), np.int64)  # noqa: E731
    runner.run(99, zeros)  # at most 99 steps of each copy: all finite so far
    with pytest.raises(NonFiniteEnvOutput, match=rf"^{re.escape(env_id)} returned nan in its "
                                                 rf"{what} \(env copy \d, step \d+ of its "
                                                 rf"episode\).*Fix: correct the environment"):
        runner.run(300, zeros)


def test_a_finite_output_is_never_refused():
    big = np.full((4, 3), 3e38, np.float32)  # huge is not infinite
    check_env_output("Big-v0", big, np.array([1e308, 1e308]), np.array([5, 5]))
    check_env_output("Pixels-v0", np.full((2, 84, 84), 255, np.uint8))  # ints: never NaN
    with pytest.raises(NonFiniteEnvOutput, match=r"^Big-v0 returned inf in its observation "
                                                 r"\(env copy 1, at reset\)"):
        check_env_output("Big-v0", np.array([[0.0, 1.0], [np.inf, 0.0]], np.float32))


def test_evaluation_refuses_a_non_finite_reward():
    with pytest.raises(NonFiniteEnvOutput, match=r"NaNRewardCartPole-v1 returned nan in its "
                                                 r"reward \(env copy 0, step 300 of its"):
        evaluate_policy(balance, faulty_envs.NAN_REWARD, 1, 0)  # an episode of 300+ steps


def balance(obs: np.ndarray) -> np.ndarray:
    """Push the cart the way the pole is falling: keeps CartPole up for 500 steps from seed 0
    (angle plus angular velocity; the velocity alone lets it fall after 140-200 steps)."""
    return (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)
