"""A learner group takes the step one learner takes on the whole batch.

1. The equation, by hand: the mean of two half-batch gradients is the full-batch gradient.
2. Under Ray: two :class:`LearnerRank` actors joined in a gloo group (rank 0's TCPStore), each
   updating on its half of every batch, end with the weights of one learner that updated on
   the whole batches, after 30 updates (Adam, gradient clipping and the target network
   included).
"""

import functools

import numpy as np
import pytest
import torch

from conftest import wait_until_no_actors
from rlkit.algos.dqn import DQNConfig, DQNLearner
from rlkit.core.networks import module_weights
from rlkit.core.types import Batch

CONFIG = DQNConfig(hidden=(32, 32), learning_rate=1e-3, target_update_every=10,
                   max_grad_norm=1.0)


def batches(n: int, size: int = 64, seed: int = 0) -> list[Batch]:
    rng = np.random.default_rng(seed)
    return [Batch(rng.normal(size=(size, 4)).astype(np.float32),
                  rng.integers(0, 2, size).astype(np.int64),
                  rng.normal(size=size).astype(np.float32),
                  rng.normal(size=(size, 4)).astype(np.float32),
                  (rng.random(size) < 0.1).astype(np.float32)) for _ in range(n)]


def halves(batch: Batch, ranks: int) -> list[Batch]:
    return [Batch(*(field[r::ranks] for field in batch)) for r in range(ranks)]


def make_learner(seed: int = 0) -> DQNLearner:
    torch.manual_seed(seed)
    return DQNLearner(4, 2, CONFIG)


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


@pytest.mark.ray
def test_two_ranks_on_half_batches_match_one_learner_on_whole_batches(ray_cluster):
    from rlkit.distributed.runtime.learner_group import LearnerRank, form_group

    data = batches(30)
    one = make_learner()
    for b in data:
        one.update(b)
    expected = module_weights(one.q)

    actor = ray_cluster.remote(LearnerRank).options(num_cpus=0.5)
    make = functools.partial(DQNLearner, 4, 2, CONFIG)  # importable by the actors
    ranks = [actor.remote(make, r, "q", 0) for r in range(2)]
    try:
        form_group(ranks)
        counts = ray_cluster.get([r.update.remote([halves(b, 2)[i] for b in data])
                                  for i, r in enumerate(ranks)])
        assert counts == [30, 30]
        got = ray_cluster.get([r.weights.remote() for r in ranks])
    finally:
        for r in ranks:
            ray_cluster.kill(r)
    start = module_weights(make_learner().q)
    for name, value in expected.items():
        assert np.abs(value - start[name]).max() > 1e-3  # the weights did move
        for rank in got:  # both ranks hold the one learner's weights
            np.testing.assert_allclose(rank[name], value, rtol=0, atol=1e-6)
    assert wait_until_no_actors() == []
