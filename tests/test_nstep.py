"""N-step transitions across terminations, truncations and fragment boundaries; the ladders."""

from __future__ import annotations

import numpy as np
import pytest

from rlkit.algos.exploration import epsilon_ladder, noise_ladder, worker_rungs
from rlkit.core.types import Batch
from rlkit.envs.runner import EnvRunner
from rlkit.replay.nstep import NStepBuilder

G = 0.9


def _episode(rewards, terminations, ends) -> tuple[Batch, np.ndarray]:
    """One env (N = 1); observation t is [t], next observation [t + 0.5] (the real one)."""
    t = np.arange(len(rewards), dtype=np.float32)[:, None]
    return (Batch(t, np.arange(len(rewards)), np.asarray(rewards, np.float32), t + 0.5,
                  np.asarray(terminations, np.float32)), np.asarray(ends, bool))


def test_termination_at_step_2_of_3_cuts_the_return_and_does_not_bootstrap():
    # steps 0, 1 (terminal), then a new episode: 2, 3, 4
    batch, ends = _episode([1, 2, 4, 8, 16], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0])
    out = NStepBuilder(3, G, 1).add(batch, ends)
    first = out.obs[:, 0].tolist().index(0.0)
    assert out.rewards[first] == pytest.approx(1 + G * 2)  # stops at the termination
    assert out.terminations[first] == 1.0 and out.discounts[first] == pytest.approx(G**2)
    second = out.obs[:, 0].tolist().index(1.0)
    assert out.rewards[second] == 2 and out.terminations[second] == 1.0
    third = out.obs[:, 0].tolist().index(2.0)  # the new episode's first window: full length
    assert out.rewards[third] == pytest.approx(4 + G * 8 + G**2 * 16)
    assert out.next_obs[third, 0] == 4.5 and out.discounts[third] == pytest.approx(G**3)
    assert len(out) == 3  # windows starting at 3 and 4 wait for more steps


def test_truncation_cuts_the_return_and_bootstraps_from_the_real_final_observation():
    batch, ends = _episode([1, 1, 1, 5], [0, 0, 0, 0], [0, 1, 0, 0])  # truncated after step 1
    out = NStepBuilder(3, G, 1).add(batch, ends)
    first = out.obs[:, 0].tolist().index(0.0)
    assert out.rewards[first] == pytest.approx(1 + G)
    assert out.terminations[first] == 0.0  # bootstraps...
    assert out.next_obs[first, 0] == 1.5  # ...from the final observation, not the reset one
    assert out.discounts[first] == pytest.approx(G**2)


def test_gamma_zero_gives_each_step_its_own_reward_and_no_bootstrap():
    """gamma = 0 is a valid DQN setting (each target is the one reward): the builder agrees, so
    Ape-X takes it as DQN does instead of refusing it inside a worker."""
    batch, ends = _episode([1, 2, 4, 8], [0, 0, 0, 0], [0, 0, 0, 0])
    out = NStepBuilder(3, 0.0, 1).add(batch, ends)
    assert out.rewards.tolist() == [1.0, 2.0] and out.discounts.tolist() == [0.0, 0.0]


def test_windows_cross_fragment_boundaries_exactly_once():
    rng = np.random.default_rng(0)
    rewards = rng.random(40).astype(np.float32)
    ends = np.zeros(40, bool)
    ends[[6, 7, 25]] = True
    batch, ends = _episode(rewards, ends.astype(np.float32), ends)
    whole = NStepBuilder(3, G, 1).add(batch, ends)
    builder = NStepBuilder(3, G, 1)
    parts = [builder.add(Batch(*(a[s:e] for a in batch)), ends[s:e])
             for s, e in ((0, 5), (5, 6), (6, 26), (26, 40))]
    pieces = {f: np.concatenate([getattr(p, f) for p in parts]) for f in whole._fields}
    order = np.argsort(pieces["obs"][:, 0])
    for field in whole._fields:
        np.testing.assert_allclose(pieces[field][order], getattr(whole, field))
    assert len(whole) == 38  # the windows of steps 38 and 39 are still open


def test_several_envs_are_independent_and_one_step_is_plain_transitions():
    runner = EnvRunner("CartPole-v1", 0, "discrete", num_envs=3)
    fragment = runner.run(60, lambda obs: np.zeros(len(obs), dtype=np.int64))
    ids = fragment.batch_env_ids
    one = NStepBuilder(1, 0.99, 3).add(fragment.batch, fragment.batch_ends, ids)
    by_env = np.argsort(ids, kind="stable")  # the builder returns its windows env by env
    for field in Batch._fields:
        np.testing.assert_array_equal(getattr(one, field), getattr(fragment.batch, field)[by_env])
    assert np.all(one.discounts == np.float32(0.99))
    three = NStepBuilder(3, 0.99, 3).add(fragment.batch, fragment.batch_ends, ids)
    # env 1's first window sums env 1's first three rewards (its episode lasts longer)
    r, env1 = fragment.batch.rewards, np.flatnonzero(ids == 1)
    assert not fragment.batch_ends[env1[:2]].any()
    first_env1 = np.flatnonzero((three.obs == fragment.batch.obs[env1[0]]).all(axis=1))[0]
    assert three.rewards[first_env1] == pytest.approx(r[env1[0]] + 0.99 * r[env1[1]]
                                                      + 0.99**2 * r[env1[2]])
    # ... and bootstraps from env 1's own state three steps on, not another env's row
    np.testing.assert_array_equal(three.next_obs[first_env1], fragment.batch.next_obs[env1[2]])
    assert three.discounts[first_env1] == pytest.approx(0.99**3)
    # 60 steps never reach the 500-step limit: here every episode end is a termination
    np.testing.assert_array_equal(fragment.batch_ends, fragment.batch.terminations == 1)


def test_env_ids_out_of_range_are_refused():
    batch, ends = _episode([1, 2], [0, 0], [0, 0])
    with pytest.raises(ValueError, match=r"env_ids must lie in \[0, 1\)"):
        NStepBuilder(3, G, 1).add(batch, ends, np.array([0, 1]))


def test_bad_n_is_refused_with_the_field_name():
    with pytest.raises(ValueError, match="n_step=0 must be an int >= 1"):
        NStepBuilder(0, 0.99, 1)


def test_epsilon_ladder_values():
    assert epsilon_ladder(1).tolist() == [0.4]
    np.testing.assert_allclose(epsilon_ladder(2), [0.4, 0.4**8])
    np.testing.assert_allclose(epsilon_ladder(4), [0.4, 0.4 ** (1 + 7 / 3), 0.4 ** (1 + 14 / 3),
                                                   0.4**8])
    np.testing.assert_allclose(noise_ladder(3, 0.4, 0.1), [0.4, 0.2, 0.1])
    ladder = np.arange(8)
    assert ladder[worker_rungs(1, 2)].tolist() == [1, 3, 5, 7]
