"""SAC's update as one CUDA graph: the same weights as the eager update, from the same state,
indices and random numbers. Runs where CUDA exists; on the CPU only the refusals are checked."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import cuda
from rlkit.algos.sac import SACConfig, SACLearner
from rlkit.algos.sac_graph import SACGraphUpdate
from rlkit.core.types import Batch, TensorBatch
from rlkit.replay.buffers import TensorReplayBuffer

LOW, HIGH = np.array([-2.0]), np.array([2.0])


def _filled(device: str, n: int = 2_000) -> TensorReplayBuffer:
    rng = np.random.default_rng(0)
    buffer = TensorReplayBuffer(4_096, 3, 1, device)
    buffer.add_batch(Batch(rng.normal(size=(n, 3)).astype(np.float32),
                           rng.uniform(-2, 2, (n, 1)).astype(np.float32),
                           rng.normal(size=n).astype(np.float32),
                           rng.normal(size=(n, 3)).astype(np.float32),
                           (rng.random(n) < 0.05).astype(np.float32)))
    return buffer


def _rows(buffer: TensorReplayBuffer, r: torch.Tensor) -> TensorBatch:
    return TensorBatch(*(store[r] for store in (buffer.obs, buffer.actions, buffer.rewards,
                                                buffer.next_obs, buffer.terminations)))


def _assert_same_weights(eager: SACLearner, graphed: SACLearner) -> None:
    for a, b in zip([*eager.actor.parameters(), *eager.critic.parameters(),
                     *eager.critic_target.parameters(), eager.log_alpha],
                    [*graphed.actor.parameters(), *graphed.critic.parameters(),
                     *graphed.critic_target.parameters(), graphed.log_alpha]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_a_numpy_buffer_is_refused_with_the_fix():
    from rlkit.replay.buffers import ReplayBuffer

    learner = SACLearner(3, 1, LOW, HIGH, SACConfig(hidden=(16, 16), cuda_graph=True), "cpu")
    with pytest.raises(ValueError, match="TensorReplayBuffer.*not a ReplayBuffer. Fix"):
        SACGraphUpdate(learner, ReplayBuffer(100, 3, 1), 32)


def test_a_cpu_learner_is_refused_with_the_fix():
    learner = SACLearner(3, 1, LOW, HIGH, SACConfig(hidden=(16, 16), cuda_graph=True), "cpu")
    with pytest.raises(ValueError, match="one CUDA device.*Fix: use the eager update"):
        SACGraphUpdate(learner, _filled("cpu"), 32)


def test_cuda_graph_must_be_a_bool():
    with pytest.raises(ValueError, match="cuda_graph"):
        SACConfig(cuda_graph="yes")


@cuda
def test_graph_replays_match_eager_updates_from_the_same_state_and_indices():
    cfg = SACConfig(hidden=(64, 64), batch_size=64, cuda_graph=True)
    torch.manual_seed(0)
    eager = SACLearner(3, 1, LOW, HIGH, cfg, "cuda")
    graphed = SACLearner(3, 1, LOW, HIGH, cfg, "cuda")
    graphed.load_state_dict(eager.state_dict())
    buffer = _filled("cuda")
    runner = SACGraphUpdate(graphed, buffer, cfg.batch_size)
    rows = torch.randint(0, len(buffer), (10, cfg.batch_size), device="cuda")
    runner.replay(rows[0])  # captures (and undoes its warm-up), then the first update
    graphed.load_state_dict(eager.state_dict())  # back to the common start...
    runner.invalidate()  # ...which replaced the optimiser state: capture again, before the
    runner.capture(draw_indices=False)  # seed below (the warm-up draws random numbers too)
    torch.cuda.manual_seed(1)
    for r in rows:
        runner.replay(r)
    torch.cuda.manual_seed(1)  # the same actor noise, drawn by the same kernels
    for r in rows:
        eager.update(_rows(buffer, r))
    torch.cuda.synchronize()
    assert graphed.updates == eager.updates == 10
    _assert_same_weights(eager, graphed)
    sums, count = runner.take_sums()
    assert count == 10 and all(np.isfinite(v) for v in sums)


@cuda
def test_graph_matches_eager_mid_training_after_a_checkpoint_load():
    # Adam's moments and step counters are not zero here, so the capture's warm-up must be
    # undone by copying the saved state back (not by zeroing it)
    cfg = SACConfig(hidden=(64, 64), batch_size=64, cuda_graph=True)
    torch.manual_seed(0)
    buffer = _filled("cuda")
    eager = SACLearner(3, 1, LOW, HIGH, cfg, "cuda")
    for _ in range(5):
        eager.update(buffer.sample(cfg.batch_size))
    graphed = SACLearner(3, 1, LOW, HIGH, cfg, "cuda")
    graphed.load_state_dict(eager.state_dict())
    runner = SACGraphUpdate(graphed, buffer, cfg.batch_size)
    runner.capture(draw_indices=False)
    assert graphed.updates == eager.updates == 5
    rows = torch.randint(0, len(buffer), (10, cfg.batch_size), device="cuda")
    torch.cuda.manual_seed(1)
    for r in rows:
        runner.replay(r)
    torch.cuda.manual_seed(1)
    for r in rows:
        eager.update(_rows(buffer, r))
    torch.cuda.synchronize()
    assert graphed.updates == eager.updates == 15
    _assert_same_weights(eager, graphed)


@cuda
def test_a_checkpoint_from_a_cpu_run_resumes_into_a_graph_learner():
    # a CPU run's Adam is not capturable; the graph learner's must stay capturable after the load
    cfg = SACConfig(hidden=(64, 64), batch_size=64)
    cpu = SACLearner(3, 1, LOW, HIGH, cfg, "cpu")
    cpu.update(_filled("cpu").sample(cfg.batch_size))
    graphed = SACLearner(3, 1, LOW, HIGH, SACConfig(hidden=(64, 64), batch_size=64,
                                                   cuda_graph=True), "cuda")
    graphed.load_state_dict(cpu.state_dict())
    runner = SACGraphUpdate(graphed, _filled("cuda"), cfg.batch_size)
    for _ in range(5):
        runner.replay()
    sums, count = runner.take_sums()
    assert count == 5 and graphed.updates == 6 and np.isfinite(sums.critic_loss)


@cuda
def test_building_the_graph_leaves_the_learner_unchanged_and_drawn_batches_train():
    cfg = SACConfig(hidden=(64, 64), batch_size=64, cuda_graph=True)
    learner = SACLearner(3, 1, LOW, HIGH, cfg, "cuda")
    before = [p.detach().clone() for p in learner.actor.parameters()]
    runner = SACGraphUpdate(learner, _filled("cuda"), cfg.batch_size)
    runner.capture()
    assert learner.updates == 0
    assert all(torch.equal(a, b) for a, b in zip(before, learner.actor.parameters()))
    for _ in range(50):
        runner.replay()  # indices drawn on the device
    sums, count = runner.take_sums()
    assert count == 50 and learner.updates == 50 and np.isfinite(sums.critic_loss)
    assert not all(torch.equal(a, b) for a, b in zip(before, learner.actor.parameters()))
