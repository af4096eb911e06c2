"""The Ape-X side of the DQN learner: n-step targets, importance-weighted updates, and the
actor-side priorities that must equal the learner's TD errors (DDPG's: tests/test_ddpg.py)."""

import copy

import numpy as np
import pytest
import torch
from test_dqn import FixedQ  # a Q "network" that is a fixed table, shared with the DQN tests

from rlkit.algos.dqn import (DQNConfig, DQNLearner, DQNPriorityModel, dqn_loss, dqn_q_and_targets,
                             dqn_targets, dqn_td_errors)
from rlkit.algos.prioritized_td import (importance_weights_tensor, load_prefixed_weights,
                                        prefixed_weights, td_tensors)
from rlkit.core.networks import QNetwork
from rlkit.core.types import Batch, NStepBatch

CPU = torch.device("cpu")


ONLINE = FixedQ(torch.tensor([[1.0, 5.0], [3.0, 2.0], [0.0, 0.0]]))
TARGET = FixedQ(torch.tensor([[4.0, 2.0], [7.0, 6.0], [1.0, -1.0]]))
GAMMA = 0.5
# rows: a full 3-step window; a termination inside the window (no bootstrap); a truncation
# after 2 steps (bootstraps with gamma ** 2); a 1-step window
NSTEP = NStepBatch(obs=np.array([[2.0], [2.0], [0.0], [1.0]], np.float32),
                   actions=np.array([0, 1, 1, 0]),
                   rewards=np.array([1.75, 2.0, -1.5, 1.0], np.float32),
                   next_obs=np.array([[0.0], [1.0], [1.0], [0.0]], np.float32),
                   terminations=np.array([0.0, 1.0, 0.0, 0.0], np.float32),
                   discounts=np.array([GAMMA ** 3, GAMMA ** 2, GAMMA ** 2, GAMMA], np.float32))


def test_nstep_targets_by_hand():
    t = td_tensors(NSTEP, None, CPU)
    plain = dqn_targets(ONLINE, TARGET, t.rewards, t.next_obs, t.terminations, t.discounts,
                        double=False)
    # max of the target rows: row 0 -> 4, row 1 -> 7
    expected = [1.75 + 0.125 * 4, 2.0, -1.5 + 0.25 * 7, 1.0 + 0.5 * 4]
    torch.testing.assert_close(plain, torch.tensor(expected))
    double = dqn_targets(ONLINE, TARGET, t.rewards, t.next_obs, t.terminations, t.discounts,
                         double=True)
    # the online net picks action 1 in row 0 (target value 2), action 0 in row 1 (value 7)
    expected = [1.75 + 0.125 * 2, 2.0, -1.5 + 0.25 * 7, 1.0 + 0.5 * 2]
    torch.testing.assert_close(double, torch.tensor(expected))
    q_taken, targets = dqn_q_and_targets(ONLINE, TARGET, t, double=True)
    torch.testing.assert_close(q_taken, torch.tensor([0.0, 0.0, 5.0, 3.0]))
    np.testing.assert_allclose(dqn_td_errors(ONLINE, TARGET, NSTEP, double=True),
                               np.abs(np.array(expected) - [0.0, 0.0, 5.0, 3.0]))


def test_float_gamma_and_equal_discounts_give_identical_targets():
    t = td_tensors(NSTEP, None, CPU)
    as_float = dqn_targets(ONLINE, TARGET, t.rewards, t.next_obs, t.terminations, GAMMA, True)
    as_tensor = dqn_targets(ONLINE, TARGET, t.rewards, t.next_obs, t.terminations,
                            torch.full((4,), GAMMA), True)
    assert torch.equal(as_float, as_tensor)


def test_read_only_arrays_from_ray_are_copied_without_a_warning():
    """Ray's object store hands out read-only arrays; torch warns when it is asked to share one
    (the pink warning notebook 07 showed). td_tensors copies those, and only those."""
    import warnings

    frozen = NStepBatch(*(np.array(field) for field in NSTEP))
    for field in frozen:
        field.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = td_tensors(frozen, None, CPU)
    torch.testing.assert_close(t.rewards, torch.from_numpy(NSTEP.rewards))
    assert t.actions.dtype == torch.as_tensor(NSTEP.actions).dtype
    assert td_tensors(NSTEP, None, CPU).obs.data_ptr() == NSTEP.obs.ctypes.data  # writable: shared


def test_one_step_batch_uses_gamma_and_a_missing_gamma_is_an_error():
    one_step = Batch(*NSTEP[:5])
    assert td_tensors(one_step, 0.9, CPU).discounts == 0.9
    with pytest.raises(ValueError, match="NStepBatch"):
        td_tensors(one_step, None, CPU)


def test_importance_weighted_huber_and_squared_loss_by_hand():
    q_taken = torch.tensor([0.0, 0.0, 1.0])
    targets = torch.tensor([0.5, -3.0, 1.0])  # |td| 0.5 (quadratic), 3 (linear), 0
    w = torch.tensor([1.0, 0.5, 2.0])
    huber = [0.5 * 0.5 ** 2, 3.0 - 0.5, 0.0]
    assert dqn_loss(q_taken, targets, True, w).item() == pytest.approx(
        (1.0 * huber[0] + 0.5 * huber[1]) / 3)
    assert dqn_loss(q_taken, targets, False, w).item() == pytest.approx((0.25 + 0.5 * 9) / 3)
    assert dqn_loss(q_taken, targets, True).item() == pytest.approx(sum(huber) / 3)


def test_importance_weights_are_checked():
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        importance_weights_tensor(np.ones(4), 3, CPU)
    with pytest.raises(ValueError, match=">= 0"):
        importance_weights_tensor(np.array([1.0, -1.0]), 2, CPU)
    with pytest.raises(ValueError, match="finite"):
        importance_weights_tensor(np.array([1.0, np.nan]), 2, CPU)


def _random_batch(n=16, seed=0, gamma=0.99):
    rng = np.random.default_rng(seed)
    return NStepBatch(rng.normal(size=(n, 4)).astype(np.float32), rng.integers(0, 2, n),
                      rng.normal(size=n).astype(np.float32),
                      rng.normal(size=(n, 4)).astype(np.float32),
                      (rng.random(n) < 0.2).astype(np.float32),
                      (gamma ** rng.integers(1, 4, n)).astype(np.float32))


def _learner(seed=0, **overrides):
    cfg = DQNConfig(hidden=(16, 16), batch_size=8, learning_starts=8,
                    target_update_every=1000, **overrides)
    torch.manual_seed(seed)
    learner = DQNLearner(4, 2, cfg)
    learner.update(_random_batch(seed=100))  # the online net now differs from the target
    return learner


@pytest.mark.parametrize("double", [True, False])
def test_actor_side_priorities_equal_the_learners(double):
    learner = _learner(double_dqn=double)
    model = DQNPriorityModel(4, 2, learner.config)
    model.load(learner.get_priority_weights())
    assert not all(torch.equal(a, b) for a, b in
                   zip(model.q.parameters(), model.q_target.parameters()))
    batch = _random_batch(seed=1)
    actor_side = model.td_errors(batch)
    metrics, learner_side = learner.update_prioritized(batch, np.ones(16, np.float32))
    assert learner_side.shape == (16,) and learner_side.dtype == np.float32
    np.testing.assert_array_equal(actor_side, learner_side)


def test_update_prioritized_returns_the_hand_td_errors_and_weighted_loss():
    learner = _learner(huber=False)
    batch, w = _random_batch(seed=2), np.linspace(0.1, 1.0, 16).astype(np.float32)
    t = td_tensors(batch, None, CPU)
    with torch.no_grad():
        best = learner.q(t.next_obs).argmax(1, keepdim=True)
        next_v = learner.q_target(t.next_obs).gather(1, best).squeeze(1)
        hand = (t.rewards + t.discounts * (1 - t.terminations) * next_v
                - learner.q(t.obs).gather(1, t.actions.unsqueeze(1)).squeeze(1)).numpy()
    metrics, td = learner.update_prioritized(batch, w)
    np.testing.assert_allclose(td, np.abs(hand), rtol=1e-5, atol=1e-6)
    assert metrics.loss == pytest.approx(float(np.mean(w * hand ** 2)), rel=1e-5)


def test_duplicates_count_once_per_occurrence():
    # a transition sampled twice, with weights 0.25 and 0.75, counts (0.25 + 0.75) / 2 of the
    # loss: the same step as a batch holding it once with weight 1 next to a weight-0 row
    batch = _random_batch(n=2, seed=3)
    twice = NStepBatch(*(np.stack([f[0], f[0]]) for f in batch))
    once = NStepBatch(*(np.stack([f[0], f[1]]) for f in batch))
    a, b = _learner(), _learner()
    _, td = a.update_prioritized(twice, np.array([0.25, 0.75], np.float32))
    assert td[0] == td[1]
    b.update_prioritized(once, np.array([1.0, 0.0], np.float32))
    for pa, pb in zip(a.q.parameters(), b.q.parameters()):
        torch.testing.assert_close(pa, pb)


def test_plain_update_equals_prioritized_with_unit_weights_and_gamma():
    batch = _random_batch(seed=4)
    one_step = Batch(*batch[:5])
    as_nstep = NStepBatch(*one_step, np.full(16, 0.99, np.float32))
    a, b = _learner(), _learner()
    for _ in range(3):
        ma = a.update(one_step)
        mb, _ = b.update_prioritized(as_nstep, np.ones(16, np.float32))
        assert ma == pytest.approx(mb, rel=1e-6)
    for pa, pb in zip(a.q.parameters(), b.q.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-6, atol=1e-7)


def test_update_prioritized_keeps_the_target_schedule():
    cfg = DQNConfig(hidden=(8,), batch_size=8, learning_starts=8, target_update_every=2)
    learner = DQNLearner(4, 2, cfg)
    batch = _random_batch()
    learner.update_prioritized(batch, np.ones(16))
    assert not torch.equal(learner.q.net[0].weight, learner.q_target.net[0].weight)
    learner.update_prioritized(batch, np.ones(16))
    assert torch.equal(learner.q.net[0].weight, learner.q_target.net[0].weight)
    assert learner.updates == 2


def test_prefixed_weights_round_trip_and_name_the_missing_network():
    source = {"q": QNetwork(4, 2, (8,)), "q_target": QNetwork(4, 2, (8,))}
    weights = prefixed_weights(source)
    assert {k.split(".")[0] for k in weights} == {"q", "q_target"}
    dest = {"q": QNetwork(4, 2, (8,)), "q_target": QNetwork(4, 2, (8,))}
    load_prefixed_weights(dest, weights)
    for name in source:
        for a, b in zip(source[name].parameters(), dest[name].parameters()):
            assert torch.equal(a, b)
    only_online = {k: v for k, v in weights.items() if k.startswith("q.")}
    with pytest.raises(KeyError, match="q_target"):
        load_prefixed_weights(copy.deepcopy(dest), only_online)
