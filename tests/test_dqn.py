import dataclasses
import math

import numpy as np
import pytest
import torch

from rlkit.algos.dqn import DQNConfig, DQNLearner, dqn_targets, linear_epsilon
from rlkit.core.common import bootstrap_target
from rlkit.core.networks import QNetwork
from rlkit.core.types import Batch
from rlkit.train import train_dqn


def test_bootstrap_target_handmade_numbers():
    rewards = torch.tensor([1.0, 1.0, 0.5])
    terminations = torch.tensor([0.0, 1.0, 0.0])  # row 2 is a time-limit truncation
    next_values = torch.tensor([10.0, 10.0, 4.0])
    y = bootstrap_target(rewards, terminations, next_values, gamma=0.9)
    # 1 + 0.9*10, 1 (terminal: no future), 0.5 + 0.9*4 (truncated: still bootstraps)
    torch.testing.assert_close(y, torch.tensor([10.0, 1.0, 4.1]))


class FixedQ(QNetwork):
    """A 'network' that returns a fixed Q table row per observation index obs[:, 0]."""

    def __init__(self, table):
        super().__init__(1, table.shape[1], hidden=(1,))
        self.table = table

    def forward(self, obs):
        return self.table[obs[:, 0].long()]


def test_dqn_and_double_dqn_targets_handmade():
    online = FixedQ(torch.tensor([[1.0, 5.0], [3.0, 2.0]]))
    target = FixedQ(torch.tensor([[4.0, 2.0], [7.0, 6.0]]))
    next_obs = torch.tensor([[0.0], [1.0], [1.0]])
    rewards = torch.tensor([1.0, 1.0, 1.0])
    terminations = torch.tensor([0.0, 0.0, 1.0])
    plain = dqn_targets(online, target, rewards, next_obs, terminations, 0.5, double=False)
    # max of target rows: 4, 7, (terminal)
    torch.testing.assert_close(plain, torch.tensor([1 + 0.5 * 4, 1 + 0.5 * 7, 1.0]))
    double = dqn_targets(online, target, rewards, next_obs, terminations, 0.5, double=True)
    # online argmax picks action 1 in row 0 (target value 2) and action 0 in row 1 (value 7)
    torch.testing.assert_close(double, torch.tensor([1 + 0.5 * 2, 1 + 0.5 * 7, 1.0]))


def test_target_network_starts_equal_and_syncs_on_schedule():
    cfg = DQNConfig(target_update_every=3, batch_size=8, learning_starts=8)
    learner = DQNLearner(4, 2, cfg)
    for p, pt in zip(learner.q.parameters(), learner.q_target.parameters()):
        assert torch.equal(p, pt)
    rng = np.random.default_rng(0)
    batch = Batch(rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 2, 8),
                  np.ones(8, np.float32), rng.normal(size=(8, 4)).astype(np.float32),
                  np.zeros(8, np.float32))

    def same():
        return all(torch.equal(p, pt) for p, pt in
                   zip(learner.q.parameters(), learner.q_target.parameters()))

    metrics = learner.update(batch)
    assert metrics._fields == ("loss", "q_mean", "grad_norm")  # a DQNReport
    assert all(math.isfinite(v) for v in metrics)
    assert not same()  # the online net moved, the target did not
    learner.update(batch)
    assert not same()
    learner.update(batch)  # third update: sync
    assert same()


def test_polyak_sync_arithmetic():
    learner = DQNLearner(4, 2, DQNConfig(tau=0.25))
    with torch.no_grad():
        for p in learner.q.parameters():
            p.fill_(1.0)
        for p in learner.q_target.parameters():
            p.fill_(0.0)
    learner.sync_target()
    for p in learner.q_target.parameters():
        torch.testing.assert_close(p, torch.full_like(p, 0.25))


def test_non_finite_loss_raises_and_names_the_fix():
    learner = DQNLearner(4, 2, DQNConfig())
    batch = Batch(np.zeros((4, 4), np.float32), np.zeros(4, np.int64),
                  np.array([np.nan, 0, 0, 0], np.float32), np.zeros((4, 4), np.float32),
                  np.zeros(4, np.float32))
    before = [p.clone() for p in learner.q.parameters()]
    with pytest.raises(FloatingPointError, match=r"largest \|reward\| in the batch nan\). Fix: "
                                                 r"rewards that large \(or not finite\).*"
                                                 r"else lower learning_rate"):
        learner.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(before, learner.q.parameters()))


def test_weights_round_trip_as_numpy():
    a, b = DQNLearner(4, 2, DQNConfig()), DQNLearner(4, 2, DQNConfig(seed=1))
    weights = a.get_weights()
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    b.set_weights(weights)
    obs = torch.randn(5, 4)
    torch.testing.assert_close(a.q(obs), b.q(obs))
    torch.testing.assert_close(b.q_target(obs), b.q(obs))


@pytest.mark.parametrize("step, expected", [(0, 1.0), (500, 0.525), (1000, 0.05), (5000, 0.05)])
def test_linear_epsilon(step, expected):
    assert linear_epsilon(step, 1.0, 0.05, 1000) == pytest.approx(expected)


def test_linear_epsilon_zero_decay_is_the_floor():
    assert linear_epsilon(0, 1.0, 0.1, 0) == 0.1


BAD_CONFIGS = [
    (dict(learning_rate=-1e-3), "learning_rate"),
    (dict(learning_rate=float("nan")), "learning_rate"),
    (dict(gamma=1.0), "gamma"),
    (dict(gamma=-0.1), "gamma"),
    (dict(batch_size=1000, buffer_size=500, learning_starts=1000), "batch_size"),
    (dict(learning_starts=200_000), "learning_starts"),
    (dict(learning_starts=10), "learning_starts"),
    (dict(env_id="CartPole-v42"), "env_id"),
    (dict(total_steps=0), "total_steps"),
    (dict(train_every=0), "train_every"),
    (dict(batch_size=2.5), "batch_size"),
    (dict(tau=0.0), "tau"),
    (dict(epsilon_start=1.5), "epsilon_start"),
    (dict(epsilon_end=0.5, epsilon_start=0.1), "epsilon_end"),
    (dict(max_grad_norm=0.0), "max_grad_norm"),
    (dict(hidden=()), "hidden"),
    (dict(hidden=(64, 0)), "hidden"),
    (dict(eval_episodes=0), "eval_episodes"),
    (dict(seed=-1), "seed"),
]


@pytest.mark.parametrize("kwargs, field", BAD_CONFIGS, ids=[f for _, f in BAD_CONFIGS])
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field}=.*Fix: "):
        DQNConfig(**kwargs)


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DQNConfig().gamma = 0.5


def test_short_single_process_run_is_bit_reproducible():
    cfg = DQNConfig(total_steps=600, learning_starts=200, batch_size=32, eval_every=300,
                    eval_episodes=2, target_return=None)
    a, b = train_dqn(cfg), train_dqn(cfg)
    assert a.env_steps == b.env_steps == 600
    assert a.history.episode_returns == b.history.episode_returns
    assert a.history.losses == b.history.losses and len(a.history.losses) > 0
    assert a.history.eval_returns == b.history.eval_returns and len(a.history.eval_steps) == 2
    for pa, pb in zip(a.learner.q.parameters(), b.learner.q.parameters()):
        assert torch.equal(pa, pb)
    c = train_dqn(dataclasses.replace(cfg, seed=1))
    assert c.history.episode_returns != a.history.episode_returns


def _hand_batch(n: int = 16, reward: float = 1.0) -> Batch:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    return Batch(obs, rng.integers(0, 2, n), np.full(n, reward, np.float32),
                 (obs + 0.1).astype(np.float32), np.zeros(n, np.float32))


def test_dqn_update_on_the_cpu_returns_floats():
    metrics = DQNLearner(4, 2, DQNConfig(hidden=(16, 16))).update(_hand_batch())
    assert all(isinstance(v, float) for v in metrics)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_dqn_update_on_cuda_keeps_metrics_on_the_device_and_matches_the_cpu():
    cfg = DQNConfig(hidden=(32, 32))
    torch.manual_seed(0)
    cpu = DQNLearner(4, 2, cfg)
    gpu = DQNLearner(4, 2, cfg, "cuda")
    gpu.load_state_dict(cpu.state_dict())
    for _ in range(3):
        on_cpu, on_gpu = cpu.update(_hand_batch()), gpu.update(_hand_batch())
    assert isinstance(on_gpu.loss, torch.Tensor) and on_gpu.loss.device.type == "cuda"
    assert float(on_gpu.loss) == pytest.approx(on_cpu.loss, rel=1e-4)
    for a, b in zip(cpu.q.parameters(), gpu.q.parameters()):
        torch.testing.assert_close(a, b.cpu(), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_nan_loss_on_cuda_is_caught_once_per_batch_of_updates():
    from rlkit.algos.dqn import DQNSpec
    from rlkit.distributed.off_policy.roles import OffPolicyLearner

    learner = OffPolicyLearner(DQNSpec(DQNConfig(hidden=(16, 16), batch_size=16,
                                              learning_starts=16)), device="cuda")
    with pytest.raises(FloatingPointError, match="loss"):
        learner.add_and_train(_hand_batch(reward=float("nan")), num_updates=4)
