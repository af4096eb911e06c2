"""The sum tree and the prioritized replay, checked against brute force and hand computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlkit.core.types import NStepBatch
from rlkit.replay.prioritized import (PrioritizedReplay, beta_at, importance_weights,
                                      split_by_priority)
from rlkit.replay.sum_tree import PriorityTree


@pytest.mark.parametrize("capacity,fanout,top", [(1, 16, 1024), (7, 2, 1), (1000, 16, 8),
                                                 (131_072, 16, 1024), (5000, 4, 3)])
def test_totals_minima_and_prefix_search_match_brute_force(capacity, fanout, top):
    rng = np.random.default_rng(capacity)
    tree = PriorityTree(capacity, fanout, top)
    p = rng.random(capacity) * (rng.random(capacity) < 0.7)  # some empty slots
    p[0] = 0.5
    tree.update(np.arange(capacity), p)
    assert tree.total == pytest.approx(p.sum(), rel=1e-12)
    assert tree.min == p[p > 0].min()
    targets = rng.random(2000) * p.sum()
    expected = np.searchsorted(np.cumsum(p), targets, side="right")
    found = tree.find_prefix(targets)
    # equal except where a target lies within rounding of a boundary
    cumulative = np.cumsum(p)
    near_boundary = np.abs(cumulative[np.minimum(expected, capacity - 1)] - targets) < 1e-9
    assert np.all((found == expected) | near_boundary)
    assert np.all(p[found] > 0)


def test_a_target_at_the_total_still_finds_a_filled_slot():
    tree = PriorityTree(100, 4, 2)
    tree.update(np.array([3, 50]), np.array([0.1, 0.2]))
    assert set(tree.find_prefix(np.array([0.0, tree.total, tree.total * 2]))) <= {3, 50}


def test_sampling_frequencies_follow_priorities():
    rng = np.random.default_rng(0)
    capacity = 50
    tree = PriorityTree(capacity, 4, 4)
    p = rng.random(capacity) ** 3
    tree.update(np.arange(capacity), p)
    draws, batch = 4000, 64
    counts = np.bincount(np.concatenate([tree.stratified_sample(batch, rng)
                                         for _ in range(draws)]), minlength=capacity)
    expected = draws * batch * p / p.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    # 49 degrees of freedom: P(chi2 > 90) < 1e-3 for independent draws; stratified draws
    # vary less, so a correct tree is far below this
    assert chi2 < 90, chi2


def test_updating_the_same_index_twice_in_a_batch_keeps_the_last_value():
    tree = PriorityTree(40, 4, 2)
    tree.update(np.arange(40), np.ones(40))
    tree.update(np.array([5, 9, 5, 5]), np.array([2.0, 3.0, 7.0, 0.25]))
    assert tree[np.array([5, 9])].tolist() == [0.25, 3.0]
    assert tree.total == pytest.approx(38 + 0.25 + 3.0)
    assert tree.min == 0.25


def test_sums_do_not_drift_over_many_updates():
    rng = np.random.default_rng(1)
    tree = PriorityTree(4096, 16, 64)
    for _ in range(300):
        idx = rng.integers(0, 4096, 256)
        tree.update(idx, rng.random(256) * 1e3)
    assert tree.total == pytest.approx(tree[np.arange(4096)].sum(), rel=1e-12)


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf])
def test_bad_priorities_name_the_field(bad):
    tree = PriorityTree(10)
    with pytest.raises(ValueError, match="priorities must be finite and >= 0"):
        tree.update(np.array([1]), np.array([bad]))
    replay = PrioritizedReplay(10, 2)
    with pytest.raises(ValueError, match="priorities must be finite and >= 0.*abs"):
        replay.add(_batch(np.arange(1.0)), np.array([bad]))


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_outside_0_1_is_refused(alpha):
    with pytest.raises(ValueError, match=r"alpha=.* must be in \[0, 1\].*alpha=0.6"):
        PrioritizedReplay(10, 2, alpha=alpha)


def _batch(rewards: np.ndarray) -> NStepBatch:
    n = len(rewards)
    obs = np.repeat(rewards[:, None], 2, axis=1).astype(np.float32)
    return NStepBatch(obs, np.arange(n), rewards.astype(np.float32), obs + 1,
                      np.zeros(n, np.float32), np.full(n, 0.99**3, np.float32))


def test_importance_weights_by_hand():
    replay = PrioritizedReplay(8, 2, alpha=0.5, eps=0.0 + 1e-12)
    replay.add(_batch(np.arange(4.0)), np.array([0.0, 1.0, 4.0, 9.0]))
    p = (np.array([0.0, 1.0, 4.0, 9.0]) + 1e-12) ** 0.5  # ~[0, 1, 2, 3]
    sample = replay.sample(64, beta=0.4)
    rows = sample.batch.rewards.astype(int)  # reward i marks item i
    np.testing.assert_allclose(sample.priorities, p[rows])
    # w_i = (N P(i))^-beta / max_j (N P(j))^-beta with N = 4, P = p / sum p
    n, prob = 4, p / p.sum()
    full = (n * prob) ** -0.4
    np.testing.assert_allclose(sample.weights, full[rows] / full.max(), rtol=1e-5)
    assert importance_weights(np.array([2.0]), 1.0, 1.0)[0] == 0.5
    assert beta_at(0.0) == 0.4 and beta_at(0.5) == pytest.approx(0.7) and beta_at(2.0) == 1.0


def test_ring_overwrites_oldest_and_ignores_stale_priority_updates():
    replay = PrioritizedReplay(4, 2, alpha=1.0, eps=1e-3)
    replay.add(_batch(np.arange(3.0)), np.ones(3))  # ids 0, 1, 2
    sample = replay.sample(8, beta=1.0)
    assert set(sample.ids) <= {0, 1, 2}
    np.testing.assert_array_equal(replay.id_of(np.array([0, 1, 2])), [0, 1, 2])
    replay.add(_batch(np.arange(10.0, 13.0)), np.ones(3))  # ids 3, 4, 5 -> slots 3, 0, 1
    np.testing.assert_array_equal(replay.id_of(np.arange(4)), [4, 5, 2, 3])
    assert sorted(replay.storage.rewards.tolist()) == [2.0, 10.0, 11.0, 12.0]
    updated = replay.update_priorities(np.array([0, 1, 2, 5]), np.array([9.0, 9.0, 5.0, 2.0]))
    assert updated == 2  # ids 0 and 1 were overwritten
    assert replay.tree[np.array([2, 1, 0])] == pytest.approx([5.001, 2.001, 1.001])
    with pytest.raises(ValueError, match="ids must be in"):
        replay.update_priorities(np.array([6]), np.array([1.0]))


def test_state_dict_round_trip_continues_identically():
    a = PrioritizedReplay(16, 2, seed=3)
    a.add(_batch(np.arange(20.0)), np.linspace(0, 2, 20))
    state = a.state_dict()
    assert all(isinstance(v, (torch.Tensor, int, dict)) for v in state.values())
    b = PrioritizedReplay(16, 2, seed=99)
    b.load_state_dict(state)
    sa, sb = a.sample(32, 0.5), b.sample(32, 0.5)
    np.testing.assert_array_equal(sa.ids, sb.ids)
    np.testing.assert_array_equal(sa.weights, sb.weights)
    assert a.total_priority == pytest.approx(b.total_priority)


def test_split_by_priority_is_proportional_and_rejects_empty_shards():
    rng = np.random.default_rng(0)
    counts = sum(split_by_priority(np.array([1.0, 3.0]), 100, rng) for _ in range(400))
    assert counts.sum() == 40_000 and abs(counts[1] / 40_000 - 0.75) < 0.01
    with pytest.raises(ValueError, match="shard totals"):
        split_by_priority(np.array([0.0, 0.0]), 10, rng)


def test_the_memory_estimate_counts_every_array_the_replay_allocates():
    """The driver refuses an Ape-X replay that would not fit from this estimate, before any
    shard exists: it must count every column (discounts too) and both trees."""
    from rlkit.replay.memory import replay_bytes

    for capacity, action_dim in ((1, None), (5_000, None), (70_001, 3)):
        replay = PrioritizedReplay(capacity, 4, action_dim)
        allocated = (sum(a.nbytes for a in replay.storage)
                     + sum(a.nbytes for a in replay.tree.levels + replay.tree.min_levels))
        assert replay_bytes(capacity, 4, action_dim, prioritized=True) == allocated
