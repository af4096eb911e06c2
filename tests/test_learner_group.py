"""A learner group takes the step one learner takes on the whole batch.

1. The equation, by hand: the mean of two half-batch gradients is the full-batch gradient.
2. Under Ray: two :class:`LearnerRank` actors joined in a gloo group (rank 0's TCPStore), each
   updating on its half of every batch, end with the weights of one learner that updated on
   the whole batches, after 30 updates (Adam, gradient clipping and the target networks
   included): DQN, and DDPG with its two networks. SAC's ranks draw the actor's noise each
   for its own half, so there the check is that both ranks end with the same weights (the
   critics', the actor's and the temperature's gradients all averaged).
"""

import functools

import numpy as np
import pytest
import torch

from conftest import wait_until_no_actors
from rlkit.algos.ddpg import DDPGConfig, DDPGLearner
from rlkit.algos.dqn import DQNConfig, DQNLearner
from rlkit.algos.sac import SACConfig, SACLearner
from rlkit.core.networks import module_weights
from rlkit.core.types import Batch, TensorBatch

CONFIG = DQNConfig(hidden=(32, 32), learning_rate=1e-3, target_update_every=10,
                   max_grad_norm=1.0)


def batches(n: int, size: int = 64, seed: int = 0) -> list[Batch]:
    rng = np.random.default_rng(seed)
    return [Batch(rng.normal(size=(size, 4)).astype(np.float32),
                  rng.integers(0, 2, size).astype(np.int64),
                  rng.normal(size=size).astype(np.float32),
                  rng.normal(size=(size, 4)).astype(np.float32),
                  (rng.random(size) < 0.1).astype(np.float32)) for _ in range(n)]


def halves(batch: Batch | TensorBatch, ranks: int) -> list[Batch | TensorBatch]:
    return [type(batch)(*(field[r::ranks] for field in batch)) for r in range(ranks)]


def make_learner(seed: int = 0) -> DQNLearner:
    torch.manual_seed(seed)
    return DQNLearner(4, 2, CONFIG)


def test_one_rule_refuses_a_batch_the_ranks_cannot_share_equally():
    """Every driver with learner groups asks this one check (off-policy, Ape-X, IMPALA)."""
    from rlkit.distributed.off_policy.options import check_replay_shares
    from rlkit.distributed.runtime.learner_group import check_group_share

    check_group_share(4, "batch_fragments", 8)
    with pytest.raises(ValueError, match=r"^num_learners=3 must divide batch_fragments=8: each "
                                         r"rank takes an equal share of every batch. Fix: use a "
                                         r"divisor of batch_fragments.$"):
        check_group_share(3, "batch_fragments", 8)
    with pytest.raises(ValueError, match=r"^num_learners=3 must divide batch_size=128: each "
                                         r"rank samples"):
        check_replay_shares(128, 100_000, 3)
    with pytest.raises(ValueError, match=r"^num_learners=4 splits buffer_size=256 into shares "
                                         r"smaller than a batch \(128\). Fix:"):
        check_replay_shares(128, 256, 4)
    check_replay_shares(128, 512, 4)


def test_the_mean_of_half_batch_gradients_is_the_full_batch_gradient():
    batch = batches(1, 64)[0]

    def gradient(b: Batch) -> torch.Tensor:
        learner = make_learner()
        learner.sync_gradients = lambda params: captured.extend(  # read, then stop the step
            p.grad.clone().reshape(-1) for p in params)
        captured: list[torch.Tensor] = []
        learner.update(b)
        return torch.cat(captured)

    full = gradient(batch)
    mean = sum(gradient(h) for h in halves(batch, 2)) / 2
    assert full.abs().max() > 1e-3  # a real gradient, not zeros
    torch.testing.assert_close(mean, full, rtol=0, atol=1e-6)
    # and a half alone is not the full batch's gradient
    assert (gradient(halves(batch, 2)[0]) - full).abs().max() > 1e-3


def continuous_batches(n: int, size: int = 64, seed: int = 0) -> list[TensorBatch]:
    """Pendulum-shaped batches (3-d observations, 1-d actions in [-2, 2]) as tensors."""
    rng = np.random.default_rng(seed)
    return [TensorBatch(*(torch.as_tensor(x) for x in (
        rng.normal(size=(size, 3)).astype(np.float32),
        rng.uniform(-2, 2, (size, 1)).astype(np.float32), rng.normal(size=size).astype(np.float32),
        rng.normal(size=(size, 3)).astype(np.float32),
        (rng.random(size) < 0.1).astype(np.float32)))) for _ in range(n)]


LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)
# kind: (make a learner (importable by the actors), the networks compared, the data, whether one
# learner on the whole batches gives the same weights: not for SAC, whose ranks each draw the
# actor's noise for their own half, so only the ranks' agreement is checked)
LEARNERS = {
    "dqn": (functools.partial(DQNLearner, 4, 2, CONFIG), ["q"], batches, True),
    "ddpg": (functools.partial(DDPGLearner, 3, 1, LOW, HIGH, DDPGConfig(hidden=(32, 32))),
             ["actor", "critic"], continuous_batches, True),
    "sac": (functools.partial(SACLearner, 3, 1, LOW, HIGH, SACConfig(hidden=(32, 32))),
            ["actor", "critic", "log_alpha"], continuous_batches, False),
}


def weights_of(learner, networks: list[str]) -> dict[str, np.ndarray]:
    out = {}
    for name in networks:
        value = getattr(learner, name)
        out.update({f"{name}.{k}": v for k, v in (
            {name: value.detach().numpy()} if isinstance(value, torch.Tensor)
            else module_weights(value)).items()})
    return out


@pytest.mark.ray
@pytest.mark.parametrize("kind", list(LEARNERS))
def test_two_ranks_on_half_batches_match_one_learner_on_whole_batches(ray_cluster, kind):
    from rlkit.distributed.runtime.learner_group import LearnerRank, form_group

    make, networks, make_data, same_as_one = LEARNERS[kind]
    data = make_data(30)
    torch.manual_seed(0)
    one = make()
    start = weights_of(one, networks)
    for b in data:
        one.update(b)
    expected = weights_of(one, networks)

    actor = ray_cluster.remote(LearnerRank).options(num_cpus=0.5)
    ranks = [actor.remote(make, r, networks[0], 0) for r in range(2)]
    try:
        form_group(ranks)
        counts = ray_cluster.get([r.update.remote([halves(b, 2)[i] for b in data])
                                  for i, r in enumerate(ranks)])
        assert counts == [30, 30]
        got = [{f"{n}.{k}": v for n in networks
                for k, v in ray_cluster.get(r.weights.remote(n)).items()} for r in ranks]
    finally:
        for r in ranks:
            ray_cluster.kill(r)
    trained = {f"{n}.{k}" for n in networks if isinstance(getattr(one, n), torch.nn.Module)
               for k, _ in getattr(one, n).named_parameters()}  # (not the action box's buffers)
    for name, value in expected.items():
        if name in trained:
            assert np.abs(got[0][name] - start[name]).max() > 1e-3  # the weights did move
        # the ranks agree (every gradient was averaged, the temperature's too) ...
        np.testing.assert_allclose(got[1][name], got[0][name], rtol=0, atol=1e-6)
        if same_as_one:  # ... and hold the one learner's weights
            np.testing.assert_allclose(got[0][name], value, rtol=0, atol=1e-6)
    assert wait_until_no_actors() == []
