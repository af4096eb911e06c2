"""EnvRunner on gymnasium's vector envs: next-step autoreset rows are never stored.

Gymnasium 1.x vector envs reset a finished copy on the *next* ``step`` call: that call ignores
the copy's action and returns the new episode's first observation with reward 0. A scripted
environment makes every transition predictable, so the test can list them by hand.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlkit.envs.runner import EnvRunner, make_vector_env

SCRIPTED = "ScriptedCounter-v0"


class ScriptedCounter(gym.Env):
    """Episode ``e``'s observation after ``k`` steps is ``[100 e + k]``; the reward of step
    ``k`` is ``k``. Even episodes terminate at ``k = 2``; odd ones run into the 4-step limit
    (a truncation, added by the registration's ``max_episode_steps``)."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.episode, self.k = -1, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.k = self.episode + 1, 0
        return np.array([100.0 * self.episode], np.float32), {}

    def step(self, action):
        self.k += 1
        terminated = self.episode % 2 == 0 and self.k == 2
        return (np.array([100.0 * self.episode + self.k], np.float32), float(self.k),
                terminated, False, {})


if SCRIPTED not in gym.registry:
    gym.register(SCRIPTED, entry_point=ScriptedCounter, max_episode_steps=4)


def test_reset_steps_are_not_stored_and_truncation_keeps_the_final_observation():
    runner = EnvRunner(SCRIPTED, 0, "discrete", num_envs=1)
    calls = []

    def policy(obs):
        calls.append(obs[0, 0])
        return np.ones(len(obs), np.int64)

    f = runner.run(10, policy)
    # episodes: 0 (terminates after 2 steps), 1 (truncated after 4), 2 (terminates), 3 ...
    assert f.batch.obs[:, 0].tolist() == [0, 1, 100, 101, 102, 103, 200, 201, 300, 301]
    assert f.batch.next_obs[:, 0].tolist() == [1, 2, 101, 102, 103, 104, 201, 202, 301, 302]
    assert f.batch.rewards.tolist() == [1, 2, 1, 2, 3, 4, 1, 2, 1, 2]
    assert f.batch.terminations.tolist() == [0, 1, 0, 0, 0, 0, 0, 1, 0, 0]  # 104: truncated
    assert f.batch_ends.tolist() == [0, 1, 0, 0, 0, 1, 0, 1, 0, 0]
    assert f.batch_env_ids.tolist() == [0] * 10
    assert f.episode_returns == [3.0, 10.0, 3.0] and f.episode_lengths == [2, 4, 2]
    # the policy chose the 10 stored actions and nothing else: reset steps need no decision
    assert calls == f.batch.obs[:, 0].tolist()
    f2 = runner.run(3, policy)  # episode 3 carries on across calls, then truncates
    assert f2.batch.obs[:, 0].tolist() == [302, 303, 400]
    assert f2.batch_ends.tolist() == [0, 1, 0] and f2.episode_returns == [10.0]
    runner.close()


def test_several_envs_each_keep_their_own_consecutive_steps():
    runner = EnvRunner(SCRIPTED, 0, "discrete", num_envs=2)
    f = runner.run(7, lambda obs: np.zeros(len(obs), np.int64))
    assert len(f.batch) == 14  # the copies run in step here, so no vector step overshoots
    for j in range(2):
        rows = f.batch_env_ids == j
        obs, nxt, ends = f.batch.obs[rows, 0], f.batch.next_obs[rows, 0], f.batch_ends[rows]
        assert obs.tolist() == [0, 1, 100, 101, 102, 103, 200]  # two reset steps skipped
        # within an episode the next row starts where this one ended; after an end it starts
        # a new episode (a multiple of 100), never at the reset step's stale observation
        for k in range(len(obs) - 1):
            assert obs[k + 1] == (nxt[k] if not ends[k] else 100 * (obs[k] // 100 + 1))
    runner.close()


def test_native_cartpole_vector_env_is_used_and_stays_consistent():
    vec = make_vector_env("CartPole-v1", 4)
    assert "CartPoleVectorEnv" in type(vec.unwrapped).__name__  # not a SyncVectorEnv
    vec.close()
    runner = EnvRunner("CartPole-v1", 3, "discrete", num_envs=4)
    rng = np.random.default_rng(0)
    f = runner.run(300, lambda obs: rng.integers(0, 2, len(obs)))
    assert 1200 <= len(f.batch) < 1204 and f.episode_returns
    for j in range(4):
        rows = np.flatnonzero(f.batch_env_ids == j)
        obs, nxt, ends = f.batch.obs[rows], f.batch.next_obs[rows], f.batch_ends[rows]
        same = (obs[1:] == nxt[:-1]).all(axis=1)
        np.testing.assert_array_equal(same, ~ends[:-1])  # continuity except across resets
        assert (np.abs(obs[1:][ends[:-1]]) <= 0.05).all()  # a new episode's start state
    assert sum(f.episode_lengths) <= len(f.batch)
    runner.close()


def test_pendulum_falls_back_to_the_sync_vector_env():
    vec = make_vector_env("Pendulum-v1", 2)
    assert isinstance(vec, gym.vector.SyncVectorEnv)
    vec.close()
    runner = EnvRunner("Pendulum-v1", 0, "continuous", num_envs=2)
    f = runner.run(201, lambda obs: np.zeros((len(obs), 1), np.float32))
    assert f.episode_lengths == [200, 200]  # truncated by the time limit, both envs
    assert f.batch.terminations.sum() == 0 and f.batch_ends.sum() == 2
    assert len(f.batch) == 402 and f.batch.actions.shape == (402, 1)
    runner.close()


def test_bad_num_envs_names_the_field():
    with pytest.raises(ValueError, match="num_envs=0 must be an int >= 1"):
        EnvRunner("CartPole-v1", 0, "discrete", num_envs=0)


def test_fixed_length_fragment_keeps_reset_rows_marked_for_on_policy_learners():
    """The same stream as the first test, time-major: exactly T rows, reset rows included and
    marked, behaviour log-probabilities recorded, and ``batch`` equal to the replay view."""
    runner = EnvRunner(SCRIPTED, 0, "discrete", num_envs=1)
    calls = []

    def policy(obs):
        calls.append(obs[0, 0])
        return np.ones(len(obs), np.int64), np.full(len(obs), -0.25, np.float32)

    f = runner.run(9, policy, fixed_length=True)
    assert f.obs.shape == (9, 1, 1) and f.log_probs.shape == (9, 1)
    # rows: 0 1 | reset | 100 101 102 103 | reset | 200; the reset rows' obs are stale ends
    assert f.obs[:, 0, 0].tolist() == [0, 1, 2, 100, 101, 102, 103, 104, 200]
    assert f.next_obs[:, 0, 0].tolist() == [1, 2, 100, 101, 102, 103, 104, 200, 201]
    assert f.resets[:, 0].tolist() == [0, 0, 1, 0, 0, 0, 0, 1, 0]
    assert f.rewards[:, 0].tolist() == [1, 2, 0, 1, 2, 3, 4, 0, 1]
    assert f.terminations[:, 0].tolist() == [0, 1, 0, 0, 0, 0, 0, 0, 0]
    assert f.truncations[:, 0].tolist() == [0, 0, 0, 0, 0, 0, 1, 0, 0]  # 104: the time limit
    assert f.num_steps == 7 and f.episode_returns == [3.0, 10.0]
    # the policy decides real steps only (here one env: a reset row is an idle step)
    assert calls == f.batch.obs[:, 0].tolist() == [0, 1, 100, 101, 102, 103, 200]
    assert f.log_probs[:, 0].tolist() == [-0.25, -0.25, 0, -0.25, -0.25, -0.25, -0.25, 0, -0.25]
    assert f.batch_ends.tolist() == [0, 1, 0, 0, 0, 1, 0]
    runner.close()


def test_a_greedy_policy_leaves_log_probs_empty():
    runner = EnvRunner(SCRIPTED, 0, "discrete", num_envs=2)
    f = runner.run(3, lambda obs: np.zeros(len(obs), np.int64), fixed_length=True)
    assert f.log_probs is None and f.obs.shape == (3, 2, 1)
    runner.close()
