import numpy as np
import pytest

from rlkit.core.types import Batch
from rlkit.replay.buffers import ReplayBuffer


def make_batch(start: int, n: int, obs_dim: int = 3) -> Batch:
    """Transitions whose every field encodes the index i = start..start+n-1."""
    i = np.arange(start, start + n)
    obs = np.repeat(i[:, None], obs_dim, axis=1).astype(np.float32)
    return Batch(obs, i.astype(np.int64), i.astype(np.float32), obs + 0.5,
                 (i % 2).astype(np.float32))


def test_add_fills_in_order_and_wraps_around():
    buf = ReplayBuffer(capacity=4, obs_dim=3)
    for i in range(6):
        buf.add(np.full(3, i), i, float(i), np.full(3, i + 0.5), terminated=i == 5)
    assert len(buf) == 4
    assert buf.pos == 2
    # slots 0 and 1 were overwritten by transitions 4 and 5; slots 2, 3 keep 2, 3
    assert buf.rewards.tolist() == [4.0, 5.0, 2.0, 3.0]
    assert buf.actions.tolist() == [4, 5, 2, 3]
    assert buf.terminations.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert buf.next_obs[1].tolist() == [5.5, 5.5, 5.5]


def test_add_batch_wraps_like_single_adds():
    one_by_one = ReplayBuffer(capacity=5, obs_dim=3)
    batched = ReplayBuffer(capacity=5, obs_dim=3)
    for start, n in [(0, 3), (3, 4), (7, 2)]:  # the second batch crosses the end of the ring
        b = make_batch(start, n)
        batched.add_batch(b)
        for t in range(n):
            one_by_one.add(b.obs[t], b.actions[t], b.rewards[t], b.next_obs[t],
                           bool(b.terminations[t]))
    assert (batched.pos, batched.size) == (one_by_one.pos, one_by_one.size) == (4, 5)
    for name in ("obs", "actions", "rewards", "next_obs", "terminations"):
        np.testing.assert_array_equal(getattr(batched, name), getattr(one_by_one, name))
    assert sorted(batched.rewards.tolist()) == [4.0, 5.0, 6.0, 7.0, 8.0]


def test_add_batch_larger_than_capacity_keeps_the_newest():
    buf = ReplayBuffer(capacity=4, obs_dim=3)
    buf.add_batch(make_batch(0, 10))
    one_by_one = ReplayBuffer(capacity=4, obs_dim=3)
    for i in range(10):
        one_by_one.add(np.full(3, i), i, float(i), np.full(3, i + 0.5), bool(i % 2))
    assert len(buf) == 4 and buf.pos == one_by_one.pos == 2
    np.testing.assert_array_equal(buf.rewards, one_by_one.rewards)  # [8, 9, 6, 7]
    assert buf.rewards.tolist() == [8.0, 9.0, 6.0, 7.0]


def test_sample_shapes_dtypes_and_content():
    buf = ReplayBuffer(capacity=100, obs_dim=3, seed=1)
    buf.add_batch(make_batch(0, 10))
    b = buf.sample(32)
    assert isinstance(b, Batch) and len(b) == 32
    assert b.obs.shape == (32, 3) and b.obs.dtype == np.float32
    assert b.next_obs.shape == (32, 3) and b.next_obs.dtype == np.float32
    assert b.actions.shape == (32,) and b.actions.dtype == np.int64
    assert b.rewards.shape == (32,) and b.rewards.dtype == np.float32
    assert b.terminations.shape == (32,) and b.terminations.dtype == np.float32
    # only the 10 stored rows can come out, and the fields of a row stay together
    assert set(b.rewards.tolist()) <= set(range(10))
    np.testing.assert_array_equal(b.obs[:, 0], b.rewards)
    np.testing.assert_array_equal(b.actions, b.rewards.astype(np.int64))


def test_sample_returns_copies():
    buf = ReplayBuffer(capacity=10, obs_dim=3)
    buf.add_batch(make_batch(0, 10))
    b = buf.sample(5)
    b.obs[:] = -1
    assert (buf.obs >= 0).all()


def test_continuous_actions_are_float_vectors():
    buf = ReplayBuffer(capacity=8, obs_dim=3, action_dim=2)
    buf.add(np.zeros(3), np.array([0.5, -0.5]), 1.0, np.ones(3), False)
    b = buf.sample(4)
    assert b.actions.shape == (4, 2) and b.actions.dtype == np.float32


def test_sampling_is_seeded():
    a, b = ReplayBuffer(50, 3, seed=7), ReplayBuffer(50, 3, seed=7)
    a.add_batch(make_batch(0, 50))
    b.add_batch(make_batch(0, 50))
    np.testing.assert_array_equal(a.sample(16).rewards, b.sample(16).rewards)


def test_empty_and_bad_sizes_raise_clear_errors():
    with pytest.raises(ValueError, match="empty"):
        ReplayBuffer(4, 3).sample(1)
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0, 3)
    with pytest.raises(ValueError, match="GiB"):
        ReplayBuffer(10**12, 3)
