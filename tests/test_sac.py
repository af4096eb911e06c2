import math

import numpy as np
import pytest
import torch
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from rlkit.algos.sac import SACConfig, SACLearner, sac_alpha_loss, sac_critic_target
from rlkit.core.common import polyak_update
from rlkit.core.networks import SquashedGaussianActor
from rlkit.core.types import Batch, TensorBatch
from rlkit.replay.buffers import TensorReplayBuffer
from rlkit.train import train_sac

LOW, HIGH = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)


def test_squashed_log_prob_matches_torch_distributions():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(3, 2, (16,), LOW, HIGH)
    obs = torch.randn(64, 3)
    mean, log_std = actor.distribution_params(obs)
    u = mean + log_std.exp() * torch.randn_like(mean)
    actions, log_prob = actor.squash(u, mean, log_std)
    reference = TransformedDistribution(
        Normal(mean, log_std.exp()),
        [TanhTransform(cache_size=1), AffineTransform(actor.bias, actor.scale)])
    expected = reference.log_prob(actions).sum(-1)
    ok = (actions - actor.bias).abs() < 0.999 * actor.scale  # away from float saturation
    torch.testing.assert_close(log_prob[ok.all(-1)], expected[ok.all(-1)], atol=2e-3, rtol=1e-4)


def test_squashed_density_integrates_to_one():
    # 1-D actor with a fixed mean and std: integrate exp(log pi(a)) over the action range.
    actor = SquashedGaussianActor(1, 1, (4,), np.array([-2.0]), np.array([2.0]))
    mean, log_std = torch.tensor([[0.3]]), torch.tensor([[math.log(0.8)]])
    a = torch.linspace(-2 + 1e-4, 2 - 1e-4, 200_001)
    u = torch.atanh((a / 2).double()).float().unsqueeze(1)
    _, log_prob = actor.squash(u, mean.expand_as(u), log_std.expand_as(u))
    total = torch.trapezoid(log_prob.double().exp(), a.double())
    assert total.item() == pytest.approx(1.0, abs=1e-3)


def test_sampled_actions_stay_in_the_box_and_deterministic_is_the_squashed_mean():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(3, 2, (16,), LOW, HIGH)
    actions, log_prob = actor(torch.randn(1000, 3) * 10)
    assert actions.shape == (1000, 2) and log_prob.shape == (1000,)
    assert (actions >= torch.tensor(LOW)).all() and (actions <= torch.tensor(HIGH)).all()
    obs = torch.randn(5, 3)
    mean, _ = actor.distribution_params(obs)
    torch.testing.assert_close(actor.deterministic(obs),
                               actor.bias + actor.scale * torch.tanh(mean))


@pytest.mark.parametrize("log_prob, direction", [(-5.0, "down"), (3.0, "up")])
def test_temperature_moves_towards_the_target_entropy(log_prob, direction):
    # target entropy -1: entropy -log_prob = 5 is above it (alpha should fall),
    # entropy -3 is below it (alpha should rise).
    log_alpha = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([log_alpha], lr=0.1)
    sac_alpha_loss(log_alpha, torch.full((8,), log_prob), target_entropy=-1.0).backward()
    opt.step()
    assert (log_alpha.item() < 0) == (direction == "down")
    assert log_alpha.item() != 0


def test_polyak_update_arithmetic():
    target, source = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    with torch.no_grad():
        for p in target.parameters():
            p.fill_(0.0)
        for p in source.parameters():
            p.fill_(1.0)
    polyak_update(target, source, 0.25)
    polyak_update(target, source, 0.25)  # 0.25, then 0.25 + 0.25 * 0.75
    for p in target.parameters():
        torch.testing.assert_close(p, torch.full_like(p, 0.4375))


def test_critic_target_handmade_terminations_vs_truncations():
    rewards = torch.tensor([1.0, 1.0, -2.0])
    terms = torch.tensor([0.0, 1.0, 0.0])  # row 2 is a time-limit truncation: bootstraps
    q1, q2 = torch.tensor([10.0, 10.0, 4.0]), torch.tensor([8.0, 12.0, 6.0])
    log_prob = torch.tensor([-1.0, -1.0, 2.0])
    y = sac_critic_target(rewards, terms, q1, q2, log_prob, alpha=0.5, gamma=0.9)
    # min(Q) - alpha log pi: 8.5, (terminal), 4 - 1 = 3
    torch.testing.assert_close(y, torch.tensor([1 + 0.9 * 8.5, 1.0, -2 + 0.9 * 3.0]))


def _random_batch(n=32, device="cpu"):
    g = torch.Generator().manual_seed(0)
    batch = TensorBatch(torch.randn(n, 3, generator=g), torch.rand(n, 1, generator=g) * 4 - 2,
                        torch.randn(n, generator=g), torch.randn(n, 3, generator=g),
                        (torch.rand(n, generator=g) < 0.1).float())
    return TensorBatch(*(t.to(device) for t in batch))


def _one_update_changes_everything(device):
    cfg = SACConfig(hidden=(32, 32), batch_size=32, learning_starts=32)
    learner = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), cfg, device)
    before = {name: [p.detach().clone() for p in module.parameters()]
              for name, module in (("actor", learner.actor), ("critic", learner.critic),
                                   ("target", learner.critic_target))}
    alpha_before = learner.log_alpha.item()
    metrics = learner.update(_random_batch(device=device))
    assert all(v.device.type == torch.device(device).type for v in metrics)
    values = {k: v.item() for k, v in metrics._asdict().items()}
    assert all(math.isfinite(v) for v in values.values()), values
    for name, module in (("actor", learner.actor), ("critic", learner.critic),
                         ("target", learner.critic_target)):
        assert any(not torch.equal(a, b) for a, b in zip(before[name], module.parameters())), name
    assert learner.log_alpha.item() != alpha_before
    return learner


def test_one_learner_update_on_cpu():
    _one_update_changes_everything("cpu")


def test_frozen_critics_in_the_actor_step_change_nothing_but_the_work():
    # the actor's loss runs through the critics; their weight gradients from it were only
    # ever thrown away by the critic optimiser's next zero_grad, so not computing them must
    # give exactly the same training
    cfg = SACConfig(hidden=(16, 16), batch_size=32, learning_starts=32)
    torch.manual_seed(0)
    frozen = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), cfg)
    torch.manual_seed(0)
    unfrozen = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), cfg)
    unfrozen.freeze_critics_in_actor_step = False
    for step in range(3):
        batch = _random_batch()
        torch.manual_seed(step)  # the same reparameterisation noise for both
        frozen.update(batch)
        torch.manual_seed(step)
        unfrozen.update(batch)
    for a, b in zip(frozen.state_dict()["actor"].values(),
                    unfrozen.state_dict()["actor"].values()):
        assert torch.equal(a, b)
    for a, b in zip(frozen.critic.parameters(), unfrozen.critic.parameters()):
        assert torch.equal(a, b) and a.requires_grad  # unfrozen again after the actor step
    # the saving is real: a critic weight's gradient is computed once per update (by the
    # critic loss) when frozen, twice (critic loss, then actor loss) when not
    for learner, expected in ((frozen, 1), (unfrozen, 2)):
        calls = []
        handle = next(learner.critic.parameters()).register_hook(lambda g: calls.append(1))
        learner.update(_random_batch())
        handle.remove()
        assert len(calls) == expected


def test_critic_target_starts_equal():
    learner = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), SACConfig(hidden=(8,)))
    for p, pt in zip(learner.critic.parameters(), learner.critic_target.parameters()):
        assert torch.equal(p, pt)


def test_tensor_buffer_wraps_and_samples_on_its_device():
    buf = TensorReplayBuffer(5, obs_dim=3, action_dim=2)
    i = np.arange(7, dtype=np.float32)
    buf.add_batch(Batch(np.repeat(i[:, None], 3, 1), np.repeat(i[:, None], 2, 1), i,
                        np.repeat(i[:, None], 3, 1) + 0.5, np.zeros(7, np.float32)))
    assert len(buf) == 5 and buf.pos == 2
    assert sorted(buf.rewards.tolist()) == [2.0, 3.0, 4.0, 5.0, 6.0]
    batch = buf.sample(16)
    assert batch.obs.shape == (16, 3) and batch.actions.shape == (16, 2)
    torch.testing.assert_close(batch.obs[:, 0], batch.rewards)
    with pytest.raises(ValueError, match="empty"):
        TensorReplayBuffer(5, 3, 2).sample(1)


BAD = [(dict(actor_lr=0.0), "actor_lr"), (dict(critic_lr=-1.0), "critic_lr"),
       (dict(tau=0.0), "tau"), (dict(gamma=1.5), "gamma"), (dict(env_id="Nope-v0"), "env_id"),
       (dict(batch_size=512, buffer_size=256, learning_starts=600), "batch_size"),
       (dict(learning_starts=30_000), "learning_starts"), (dict(init_alpha=0.0), "init_alpha"),
       (dict(hidden=(0,)), "hidden"), (dict(eval_episodes=0), "eval_episodes")]


@pytest.mark.parametrize("kwargs, field", BAD, ids=[f for _, f in BAD])
def test_sac_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field}=.*Fix: "):
        SACConfig(**kwargs)


def test_train_sac_short_run_is_reproducible():
    cfg = SACConfig(hidden=(32, 32), batch_size=32, learning_starts=200, total_steps=500,
                    eval_every=250, eval_episodes=2, target_return=None)
    a, b = train_sac(cfg), train_sac(cfg)
    assert a.env_steps == 500 and a.learner.updates == 300
    assert a.history.episode_returns == b.history.episode_returns  # 2 Pendulum episodes
    assert a.history.eval_returns == b.history.eval_returns and len(a.history.eval_steps) == 2
    assert a.history.losses == b.history.losses


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
@cuda
def test_one_learner_update_on_gpu():
    learner = _one_update_changes_everything("cuda")
    assert next(learner.actor.parameters()).is_cuda


@pytest.mark.gpu
@cuda
def test_tensor_buffer_on_gpu_samples_without_leaving_the_device():
    buf = TensorReplayBuffer(100, 3, 1, device="cuda")
    rng = np.random.default_rng(0)
    buf.add_batch(Batch(rng.normal(size=(50, 3)).astype(np.float32),
                        rng.normal(size=(50, 1)).astype(np.float32), np.ones(50, np.float32),
                        rng.normal(size=(50, 3)).astype(np.float32), np.zeros(50, np.float32)))
    batch = buf.sample(32)
    assert all(t.is_cuda for t in batch)
