"""The catalogue of hostile inputs to the replay data structures (buffers, prioritized replay, the
sum tree, the n-step builder): each is refused at once with an error that names the argument as
the caller wrote it and says how to fix it; valid inputs next door still work. No Ray needed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlkit.core.types import Batch, NStepBatch
from rlkit.replay.buffers import ReplayBuffer, TensorReplayBuffer
from rlkit.replay.nstep import NStepBuilder
from rlkit.replay.prioritized import (PrioritizedReplay, beta_at, importance_weights,
                                      split_by_priority)
from rlkit.replay.sum_tree import PriorityTree

NAN = float("nan")


def batch(n: int = 4, obs_dim: int = 3, action_dim: int | None = None, **fields) -> Batch:
    """``n`` one-step transitions of the given sizes; ``fields`` replace single fields (a
    ``Batch``'s ``_replace`` cannot: its ``len`` counts transitions, not fields)."""
    obs = np.arange(n * obs_dim, dtype=np.float32).reshape(n, obs_dim)
    actions = (np.arange(n) % 2 if action_dim is None
               else np.full((n, action_dim), 0.5, np.float32))
    base = dict(obs=obs, actions=actions, rewards=np.arange(n, dtype=np.float32),
                next_obs=obs + 1, terminations=np.zeros(n, np.float32))
    return Batch(**{**base, **fields})


def nstep(n: int = 3, **fields) -> NStepBatch:
    return NStepBatch(*batch(n, **fields), np.full(n, 0.9**3, np.float32))


def filled() -> ReplayBuffer:
    buffer = ReplayBuffer(8, 3, seed=1)
    buffer.add_batch(batch())
    return buffer


def filled_tensor() -> TensorReplayBuffer:
    buffer = TensorReplayBuffer(8, 3, 2, "cpu", seed=1)
    buffer.add_batch(batch(action_dim=2))
    return buffer


def state(**changes) -> dict:
    return {**filled().state_dict(), **changes}


def tensor_state(**changes) -> dict:
    return {**filled_tensor().state_dict(), **changes}


def prioritized() -> PrioritizedReplay:
    replay = PrioritizedReplay(8, 3, seed=1)
    replay.add(nstep(3), np.array([0.5, 1.0, 2.0]))  # ids 0, 1, 2
    return replay


def tree() -> PriorityTree:
    t = PriorityTree(10, fanout=4, top_size=2)
    t.update(np.arange(10), np.ones(10))
    return t


def step(n: int = 4, **fields) -> tuple[Batch, np.ndarray]:
    """``n`` steps of one env with no episode end: ``NStepBuilder.add``'s arguments."""
    return batch(n, obs_dim=1, **fields), np.zeros(n, bool)


def builder(num_envs: int = 1) -> NStepBuilder:
    return NStepBuilder(3, 0.9, num_envs)


RNG = np.random.default_rng(0)

# (case, call, exception, regex the message must match: it names the argument and says "Fix:")
CASES = [
    # ---- ReplayBuffer: construction
    ("ReplayBuffer capacity 0", lambda: ReplayBuffer(0, 3), ValueError,
     r"capacity=0 must be an int >= 1. Fix:"),
    ("ReplayBuffer float capacity", lambda: ReplayBuffer(1e4, 3), ValueError,
     r"capacity=10000.0 must be an int >= 1. Fix:"),
    ("ReplayBuffer str capacity", lambda: ReplayBuffer("100", 3), ValueError,
     r"capacity='100' must be an int >= 1 \(got a str\). Fix:"),
    ("ReplayBuffer obs_dim 0", lambda: ReplayBuffer(10, 0), ValueError,
     r"obs_dim=0 must be an int >= 1 \(the flat observation size\). Fix:"),
    ("ReplayBuffer bool obs_dim", lambda: ReplayBuffer(10, True), ValueError,
     r"obs_dim=True must be an int >= 1.*\(got a bool\). Fix:"),
    ("ReplayBuffer action_dim 0", lambda: ReplayBuffer(10, 3, 0), ValueError,
     r"action_dim=0 must be an int >= 1 .* or None. Fix:"),
    ("ReplayBuffer float seed", lambda: ReplayBuffer(10, 3, seed=1.5), ValueError,
     r"seed=1.5 must be an int >= 0. Fix:"),
    ("ReplayBuffer str n_step", lambda: ReplayBuffer(10, 3, n_step="yes"), ValueError,
     r"n_step='yes' must be True or False.*Fix:"),
    # ---- ReplayBuffer.add
    ("add obs of the wrong shape", lambda: filled().add(np.zeros(2), 0, 1.0, np.zeros(3), False),
     ValueError, r"obs.shape=\(2,\) must be \(3,\). Fix:"),
    ("add a scalar next_obs", lambda: filled().add(np.zeros(3), 0, 1.0, 0.5, False),
     ValueError, r"next_obs.shape=\(\) must be \(3,\). Fix:"),
    ("add text next_obs", lambda: filled().add(np.zeros(3), 0, 1.0, np.array(list("abc")), False),
     ValueError, r"next_obs.dtype=.* must be a numeric dtype. Fix:"),
    ("add a float discrete action", lambda: filled().add(np.zeros(3), 1.5, 1.0, np.zeros(3), False),
     ValueError, r"action=1.5 must be an int >= 0.*Fix:"),
    ("add a negative discrete action", lambda: filled().add(np.zeros(3), -1, 1.0, np.zeros(3),
                                                            False),
     ValueError, r"action=-1 must be an int >= 0.*Fix:"),
    ("add a NaN reward", lambda: filled().add(np.zeros(3), 0, NAN, np.zeros(3), False),
     ValueError, r"reward=nan must be a finite number. Fix:"),
    ("add a str terminated", lambda: filled().add(np.zeros(3), 0, 1.0, np.zeros(3), "no"),
     ValueError, r"terminated='no' must be True or False.*Fix:"),
    # ---- ReplayBuffer.add_batch
    ("add_batch obs too narrow", lambda: filled().add_batch(batch(obs_dim=2)), ValueError,
     r"batch.obs.shape=\(4, 2\) must be \(4, 3\).*Fix:"),
    ("add_batch rewards too short", lambda: filled().add_batch(
        batch(rewards=np.zeros(3, np.float32))), ValueError,
     r"batch.rewards.shape=\(3,\) must be \(4,\).*Fix:"),
    ("add_batch float discrete actions", lambda: filled().add_batch(
        batch(actions=np.zeros(4, np.float32))), ValueError,
     r"batch.actions.dtype='float32' must be an int dtype.*Fix:"),
    ("add_batch torch tensors", lambda: filled().add_batch(
        Batch(*(torch.as_tensor(x) for x in batch()))), TypeError,
     r"ReplayBuffer.add_batch takes a ndarray as batch.obs, got Tensor. Fix:"),
    ("add_batch an NStepBatch to a one-step buffer", lambda: filled().add_batch(nstep()),
     TypeError, r"takes a Batch as batch, got NStepBatch. Fix:.*n_step"),
    ("add_batch a plain tuple", lambda: filled().add_batch(tuple(batch())), TypeError,
     r"takes a Batch as batch, got tuple. Fix:"),
    # ---- ReplayBuffer.sample
    ("sample 0", lambda: filled().sample(0), ValueError,
     r"batch_size=0 must be an int >= 1. Fix:"),
    ("sample a negative size", lambda: filled().sample(-5), ValueError,
     r"batch_size=-5 must be an int >= 1. Fix:"),
    ("sample a float size", lambda: filled().sample(32.0), ValueError,
     r"batch_size=32.0 must be an int >= 1. Fix:"),
    ("sample a bool size", lambda: filled().sample(True), ValueError,
     r"batch_size=True must be an int >= 1 \(got a bool\). Fix:"),
    ("sample an empty buffer", lambda: ReplayBuffer(8, 3).sample(4), ValueError,
     r"cannot sample batch_size=4 from an empty ReplayBuffer. Fix:"),
    # ---- ReplayBuffer.load_state_dict
    ("load a list", lambda: filled().load_state_dict([1, 2]), TypeError,
     r"load_state_dict takes a dict as state, got list. Fix:"),
    ("load numpy rows", lambda: filled().load_state_dict(
        state(obs=np.zeros((4, 3), np.float32))), TypeError,
     r"takes a Tensor as state\['obs'\], got ndarray. Fix:"),
    ("load rows of the wrong width", lambda: filled().load_state_dict(
        state(obs=torch.zeros(4, 5))), ValueError,
     r"state\['obs'\].shape=\(4, 5\) is not 4 rows of \(3,\). Fix:"),
    ("load a size past the capacity", lambda: filled().load_state_dict(state(size=99)),
     ValueError, r"state\['size'\]=99 must be an int in \[0, 8\]. Fix:"),
    ("load a negative position", lambda: filled().load_state_dict(state(pos=-1)), ValueError,
     r"state\['pos'\]=-1 must be an int in \[0, 7\]. Fix:"),
    ("load without the generator", lambda: filled().load_state_dict(
        {k: v for k, v in state().items() if k != "rng"}), ValueError,
     r"state=\[.*\] lacks \['rng'\].*Fix:"),
    ("load a bad generator state", lambda: filled().load_state_dict(state(rng="x")),
     ValueError, r"state\['rng'\]='x' is not a generator state.*Fix:"),
    ("load another capacity", lambda: ReplayBuffer(16, 3).load_state_dict(state()), ValueError,
     r"buffer_size is 16. Fix: set buffer_size=8"),
    # ---- TensorReplayBuffer
    ("TensorReplayBuffer capacity 0", lambda: TensorReplayBuffer(0, 3, 2), ValueError,
     r"capacity=0 must be an int >= 1. Fix:"),
    ("TensorReplayBuffer float obs_dim", lambda: TensorReplayBuffer(8, 3.0, 2), ValueError,
     r"obs_dim=3.0 must be an int >= 1.*Fix:"),
    ("TensorReplayBuffer without action_dim", lambda: TensorReplayBuffer(8, 3, None),
     ValueError, r"action_dim=None must be an int >= 1 \(the continuous action size\). Fix:"),
    ("tensor add_batch torch tensors", lambda: filled_tensor().add_batch(
        Batch(*(torch.as_tensor(x) for x in batch(action_dim=2)))), TypeError,
     r"TensorReplayBuffer.add_batch takes a ndarray as batch.obs, got Tensor. Fix:"),
    ("tensor add_batch flat actions", lambda: filled_tensor().add_batch(batch()), ValueError,
     r"batch.actions.shape=\(4,\) must be \(4, 2\).*Fix:"),
    ("tensor add_batch text rewards", lambda: filled_tensor().add_batch(
        batch(action_dim=2, rewards=np.array(list("abcd")))), ValueError,
     r"batch.rewards.dtype=.* must be a numeric dtype. Fix:"),
    ("tensor sample 0", lambda: filled_tensor().sample(0), ValueError,
     r"batch_size=0 must be an int >= 1. Fix:"),
    ("tensor sample a float size", lambda: filled_tensor().sample(2.5), ValueError,
     r"batch_size=2.5 must be an int >= 1. Fix:"),
    ("tensor sample an empty buffer", lambda: TensorReplayBuffer(8, 3, 2).sample(1), ValueError,
     r"cannot sample batch_size=1 from an empty TensorReplayBuffer. Fix:"),
    ("tensor load numpy rows", lambda: filled_tensor().load_state_dict(
        tensor_state(obs=np.zeros((4, 3), np.float32))), TypeError,
     r"takes a Tensor as state\['obs'\], got ndarray. Fix:"),
    ("tensor load a bad generator state", lambda: filled_tensor().load_state_dict(
        tensor_state(generator=torch.zeros(3, dtype=torch.uint8))), ValueError,
     r"state\['generator'\]=.* is not a generator state.*Fix:"),
    # ---- PrioritizedReplay: construction and add
    ("PrioritizedReplay NaN alpha", lambda: PrioritizedReplay(8, 3, alpha=NAN), ValueError,
     r"alpha=nan must be in \[0, 1\].*Fix:"),
    ("PrioritizedReplay eps 0", lambda: PrioritizedReplay(8, 3, eps=0), ValueError,
     r"eps=0 must be a finite number > 0.*Fix:"),
    ("PrioritizedReplay negative capacity", lambda: PrioritizedReplay(-1, 3), ValueError,
     r"capacity=-1 must be an int >= 1. Fix:"),
    ("PrioritizedReplay str obs_dim", lambda: PrioritizedReplay(8, "3"), ValueError,
     r"obs_dim='3' must be an int >= 1.*Fix:"),
    ("add too few TD errors", lambda: prioritized().add(nstep(3), np.ones(2)), ValueError,
     r"len\(td_errors\)=2 differs from the batch's 3 transitions. Fix:"),
    ("add a NaN TD error", lambda: prioritized().add(nstep(3), np.array([1.0, NAN, 1.0])),
     ValueError, r"td_errors\[1\]=nan cannot become a priority.*Fix: pass abs"),
    ("add a negative TD error", lambda: prioritized().add(nstep(3), np.array([1.0, 1.0, -2.0])),
     ValueError, r"td_errors\[2\]=-2.0 cannot become a priority.*Fix:"),
    ("add text TD errors", lambda: prioritized().add(nstep(3), ["a", "b", "c"]), ValueError,
     r"td_errors\[0\]='a' is not a number.*Fix:"),
    ("add a one-step Batch", lambda: prioritized().add(batch(3), np.ones(3)), TypeError,
     r"PrioritizedReplay.add takes a NStepBatch as batch, got Batch. Fix:"),
    ("add observations too wide", lambda: prioritized().add(nstep(3, obs_dim=4), np.ones(3)),
     ValueError, r"batch.obs.shape=\(3, 4\) must be \(3, 3\).*Fix:"),
    # ---- PrioritizedReplay.sample
    ("sample a NaN beta", lambda: prioritized().sample(4, NAN), ValueError,
     r"beta=nan must be a finite number in \[0, 1\]. Fix: use e.g. beta=0.4."),
    ("sample a negative beta", lambda: prioritized().sample(4, -0.1), ValueError,
     r"beta=-0.1 must be a finite number in \[0, 1\]. Fix:"),
    ("sample a beta above 1", lambda: prioritized().sample(4, 1.5), ValueError,
     r"beta=1.5 must be a finite number in \[0, 1\]. Fix:"),
    ("sample a str beta", lambda: prioritized().sample(4, "0.4"), ValueError,
     r"beta='0.4' must be a finite number in \[0, 1\] \(got a str\). Fix:"),
    ("prioritized sample 0", lambda: prioritized().sample(0, 0.4), ValueError,
     r"batch_size=0 must be an int >= 1. Fix:"),
    ("prioritized sample a float size", lambda: prioritized().sample(4.0, 0.4), ValueError,
     r"batch_size=4.0 must be an int >= 1. Fix:"),
    ("prioritized sample an empty replay", lambda: PrioritizedReplay(8, 3).sample(4, 0.4),
     ValueError, r"cannot sample batch_size=4 from an empty PrioritizedReplay. Fix:"),
    # ---- PrioritizedReplay.update_priorities
    ("update float ids", lambda: prioritized().update_priorities(np.array([0.0, 1.0]),
                                                                  np.ones(2)),
     ValueError, r"ids\[0\]=0.0 is not an int \(ids has dtype float64\). Fix:"),
    ("update bool ids", lambda: prioritized().update_priorities(np.array([True]), [1.0]),
     ValueError, r"ids\[0\]=True is not an int.*Fix:"),
    ("update an id never issued", lambda: prioritized().update_priorities([0, 99], [1.0, 1.0]),
     ValueError, r"ids\[1\]=99 is out of range: ids must be in \[0, 3\).*Fix:"),
    ("update a negative id", lambda: prioritized().update_priorities([-1], [1.0]), ValueError,
     r"ids\[0\]=-1 is out of range: ids must be in \[0, 3\).*Fix:"),
    ("update with fewer TD errors", lambda: prioritized().update_priorities([0, 1], [1.0]),
     ValueError, r"len\(td_errors\)=1 differs from len\(ids\)=2. Fix:"),
    ("update a NaN TD error", lambda: prioritized().update_priorities([0], [NAN]), ValueError,
     r"td_errors\[0\]=nan cannot become a priority.*Fix:"),
    # ---- importance_weights, beta_at, split_by_priority
    ("weights with a NaN beta", lambda: importance_weights(np.ones(2), 1.0, NAN), ValueError,
     r"beta=nan must be a finite number in \[0, 1\]. Fix:"),
    ("weights with a negative beta", lambda: importance_weights(np.ones(2), 1.0, -1), ValueError,
     r"beta=-1 must be a finite number in \[0, 1\]. Fix:"),
    ("weights with min_priority 0", lambda: importance_weights(np.ones(2), 0, 0.5), ValueError,
     r"min_priority=0 must be a finite number > 0. Fix:"),
    ("weights with an infinite min_priority", lambda: importance_weights(
        np.ones(2), float("inf"), 0.5), ValueError, r"min_priority=inf must be a finite.*Fix:"),
    ("weights of a priority below the minimum", lambda: importance_weights(
        np.array([2.0, 0.5]), 1.0, 0.5), ValueError,
     r"priorities\[1\]=0.5 is not a stored priority.*>= min_priority=1.0. Fix:"),
    ("weights of a NaN priority", lambda: importance_weights(np.array([NAN]), 1.0, 0.5),
     ValueError, r"priorities\[0\]=nan is not a stored priority.*Fix:"),
    ("beta_at a NaN progress", lambda: beta_at(NAN), ValueError,
     r"progress=nan must be a finite number.*Fix:"),
    ("beta_at a start above 1", lambda: beta_at(0.5, 1.5), ValueError,
     r"beta_start=1.5 must be a finite number in \[0, 1\]. Fix:"),
    ("beta_at a negative end", lambda: beta_at(0.5, 0.4, -1.0), ValueError,
     r"beta_end=-1.0 must be a finite number in \[0, 1\]. Fix:"),
    ("split all-zero totals", lambda: split_by_priority(np.zeros(2), 4, RNG), ValueError,
     r"totals=\[0.0, 0.0\] must be the shard totals.*Fix:"),
    ("split NaN totals", lambda: split_by_priority(np.array([1.0, NAN]), 4, RNG), ValueError,
     r"totals=\[1.0, nan\] must be the shard totals.*Fix:"),
    ("split no totals", lambda: split_by_priority([], 4, RNG), ValueError,
     r"totals=\[\] must be the shard totals.*Fix:"),
    ("split a batch of 0", lambda: split_by_priority(np.ones(2), 0, RNG), ValueError,
     r"batch_size=0 must be an int >= 1. Fix:"),
    ("split with a seed for a generator", lambda: split_by_priority(np.ones(2), 4, 0),
     ValueError, r"rng=0 must be a numpy Generator. Fix:"),
    # ---- PriorityTree
    ("PriorityTree capacity 0", lambda: PriorityTree(0), ValueError,
     r"capacity=0 must be an int >= 1. Fix:"),
    ("PriorityTree float capacity", lambda: PriorityTree(8.0), ValueError,
     r"capacity=8.0 must be an int >= 1. Fix:"),
    ("PriorityTree fanout 1", lambda: PriorityTree(8, fanout=1), ValueError,
     r"fanout=1 must be an int >= 2. Fix:"),
    ("tree update float indices", lambda: tree().update(np.array([1.5]), [1.0]), ValueError,
     r"indices\[0\]=1.5 is not an int \(indices has dtype float64\). Fix:"),
    ("tree update an index past the end", lambda: tree().update([0, 10], [1.0, 1.0]),
     ValueError, r"indices\[1\]=10 is out of range: indices must be in \[0, 10\).*Fix:"),
    ("tree update a negative index", lambda: tree().update([-1], [1.0]), ValueError,
     r"indices\[0\]=-1 is out of range.*Fix:"),
    ("tree update a NaN priority", lambda: tree().update([1], [NAN]), ValueError,
     r"priorities\[0\]=nan is not a priority: priorities must be finite and >= 0. Fix:"),
    ("tree update a negative priority", lambda: tree().update([1, 2], [1.0, -1.0]), ValueError,
     r"priorities\[1\]=-1.0 is not a priority.*Fix:"),
    ("tree update with fewer priorities", lambda: tree().update([1, 2], [1.0]), ValueError,
     r"len\(priorities\)=1 differs from len\(indices\)=2. Fix:"),
    ("find_prefix a NaN target", lambda: tree().find_prefix(np.array([NAN])), ValueError,
     r"targets\[0\]=nan is not a prefix sum.*Fix:"),
    ("find_prefix a negative target", lambda: tree().find_prefix(np.array([1.0, -0.5])),
     ValueError, r"targets\[1\]=-0.5 is not a prefix sum.*Fix:"),
    ("find_prefix an infinite target", lambda: tree().find_prefix([float("inf")]), ValueError,
     r"targets\[0\]=inf is not a prefix sum.*Fix:"),
    ("stratified_sample 0", lambda: tree().stratified_sample(0, RNG), ValueError,
     r"batch_size=0 must be an int >= 1. Fix:"),
    ("stratified_sample a float size", lambda: tree().stratified_sample(2.5, RNG), ValueError,
     r"batch_size=2.5 must be an int >= 1. Fix:"),
    ("stratified_sample without a generator", lambda: tree().stratified_sample(4, None),
     ValueError, r"rng=None must be a numpy Generator. Fix:"),
    # ---- NStepBuilder
    ("NStepBuilder n 0", lambda: NStepBuilder(0, 0.9, 1), ValueError,
     r"n_step=0 must be an int >= 1.*Fix:"),
    ("NStepBuilder float n", lambda: NStepBuilder(2.0, 0.9, 1), ValueError,
     r"n_step=2.0 must be an int >= 1.*Fix:"),
    ("NStepBuilder gamma below 0", lambda: NStepBuilder(3, -0.1, 1), ValueError,
     r"gamma=-0.1 must be a finite number in \[0, 1\]. Fix:"),
    ("NStepBuilder NaN gamma", lambda: NStepBuilder(3, NAN, 1), ValueError,
     r"gamma=nan must be a finite number in \[0, 1\]. Fix:"),
    ("NStepBuilder num_envs 0", lambda: NStepBuilder(3, 0.9, 0), ValueError,
     r"num_envs=0 must be an int >= 1. Fix:"),
    ("NStepBuilder add too few end flags", lambda: builder().add(step()[0], np.zeros(3, bool)),
     ValueError, r"len\(ends\)=3 differs from the batch's 4 rows. Fix:"),
    ("NStepBuilder add next_obs unlike obs", lambda: builder().add(
        *step(next_obs=np.zeros((4, 2), np.float32))), ValueError,
     r"batch.next_obs.shape=\(4, 2\) must be \(4, 1\).*Fix:"),
    ("NStepBuilder add rewards too long", lambda: builder().add(
        *step(rewards=np.zeros(5, np.float32))), ValueError,
     r"batch.rewards.shape=\(5,\) must be \(4,\).*Fix:"),
    ("NStepBuilder add an NStepBatch", lambda: builder().add(nstep(4), np.zeros(4, bool)),
     TypeError, r"NStepBuilder.add takes a Batch as batch, got NStepBatch. Fix:"),
    ("NStepBuilder add float env ids", lambda: builder().add(*step(), np.zeros(4)), ValueError,
     r"env_ids\[0\]=0.0 is not an int.*Fix:"),
    ("NStepBuilder add float end flags", lambda: builder().add(step()[0], np.full(4, 0.5)),
     ValueError, r"ends\[0\]=0.5 is not a bool.*Fix:"),
    ("NStepBuilder add a fragment of partial steps", lambda: builder(3).add(*step()),
     ValueError, r"len\(batch\)=4 is not a whole number of steps of num_envs=3.*Fix:"),
]


@pytest.mark.parametrize("case, call, error, pattern", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_refused_naming_the_argument(case, call, error, pattern):
    with pytest.raises(error, match=pattern) as caught:
        call()
    assert "Fix:" in str(caught.value)


def test_the_catalogue_is_large_and_every_pattern_asks_for_a_fix():
    assert len(CASES) >= 45
    assert len({c[0] for c in CASES}) == len(CASES)
    assert all("Fix" in pattern for *_, pattern in CASES)


def test_a_refused_state_changes_nothing():
    buffer = filled()
    before = {name: getattr(buffer, name).copy() for name in buffer.fields}
    bad = {**ReplayBuffer(8, 3).state_dict(), "rng": "x"}  # empty rows, then a bad generator
    with pytest.raises(ValueError, match=r"state\['rng'\]"):
        buffer.load_state_dict(bad)
    assert (len(buffer), buffer.pos) == (4, 4)
    for name, values in before.items():
        np.testing.assert_array_equal(getattr(buffer, name), values)


def test_a_refused_batch_or_update_changes_nothing():
    replay = prioritized()
    total = replay.total_priority
    with pytest.raises(ValueError, match="td_errors"):
        replay.add(nstep(3), np.array([1.0, NAN, 1.0]))
    with pytest.raises(ValueError, match="ids"):
        replay.update_priorities([0, 99], [5.0, 5.0])
    assert (len(replay), replay.total_priority) == (3, total)


# ---- valid inputs next to the refused ones still work


def test_numpy_integers_are_accepted_as_indices_ids_and_sizes():
    t = tree()
    t.update(np.array([1, 2], np.int32), np.array([3.0, 0.0], np.float32))
    assert t[np.arange(3)].tolist() == [1.0, 3.0, 0.0]
    assert set(t.stratified_sample(np.int64(16), RNG)) <= set(range(10)) - {2}
    replay = prioritized()
    assert replay.update_priorities(np.array([0, 2], np.uint8), [1.0, 3.0]) == 2
    assert len(replay.sample(np.int64(5), np.float32(0.5)).ids) == 5
    assert len(filled().sample(np.int64(3))) == 3
    buffer = ReplayBuffer(capacity=np.int64(4), obs_dim=3)
    buffer.add(np.zeros(3, np.float64), np.int64(1), np.float32(0.5), [1, 2, 3], np.bool_(True))
    assert buffer.actions[0] == 1 and buffer.terminations[0] == 1.0


@pytest.mark.parametrize("beta", [0, 0.0, 1, 1.0, 0.4])
def test_beta_at_the_ends_of_its_range_is_accepted(beta):
    sample = prioritized().sample(16, beta)
    assert np.all(sample.weights <= 1.0) and np.all(sample.weights > 0)
    if beta == 0:
        assert np.all(sample.weights == 1.0)
    weights = importance_weights(np.array([1.0, 2.0]), 1.0, beta)
    assert weights[0] == 1.0 and weights[1] == pytest.approx(2.0 ** -beta)
    assert beta_at(0.3, beta, beta) == beta


def test_sampling_more_than_is_stored_is_allowed_since_draws_are_with_replacement():
    # deliberate: Ape-X gives a shard its share of a batch by total priority, not by size
    assert len(filled().sample(64)) == 64
    assert filled_tensor().sample(64).obs.shape == (64, 3)
    assert len(prioritized().sample(64, 0.4).ids) == 64


def test_stale_ids_are_skipped_and_counted_not_refused():
    replay = PrioritizedReplay(4, 3)
    replay.add(nstep(3), np.ones(3))  # ids 0, 1, 2 in slots 0, 1, 2
    replay.add(nstep(3), np.ones(3))  # ids 3, 4, 5: 4 and 5 overwrite ids 0 and 1
    assert replay.update_priorities([0, 1, 2, 5], [9.0, 9.0, 9.0, 9.0]) == 2
    assert replay.update_priorities(np.array([]), np.array([])) == 0  # an empty update


def test_edge_values_that_are_valid_pass():
    t = tree()
    assert set(t.find_prefix([0.0, t.total, 2 * t.total])) <= set(range(10))  # held inside
    assert beta_at(-1.0) == 0.4 and beta_at(7.0) == 1.0  # progress is clipped, as documented
    assert split_by_priority([0, 3], 5, RNG).tolist() == [0, 5]  # an empty shard beside one
    two_envs = NStepBuilder(1, 1.0, 2)  # n = 1 and gamma = 1 are both allowed
    out = two_envs.add(step()[0], np.zeros(4, np.int64), np.array([0, 1, 0, 1]))  # int flags
    assert len(out) == 4 and np.all(out.discounts == 1.0)
    one_step = ReplayBuffer(4, 1, action_dim=None, n_step=True)
    one_step.add_batch(out)
    assert len(one_step) == 4
