import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn

from rlkit.algos.ddpg import (DDPGConfig, DDPGLearner, DDPGPriorityModel, DDPGSpec, ddpg_actor_loss,
                              ddpg_critic_loss, ddpg_td_errors, gaussian_exploration_policy)
from rlkit.algos.prioritized_td import td_tensors
from rlkit.core.networks import DeterministicActor
from rlkit.core.types import Batch, NStepBatch
from rlkit.train import train_single_process

CPU = torch.device("cpu")
LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)
SMALL = DDPGConfig(hidden=(16, 16), batch_size=8, learning_starts=8)


class SumCritic(nn.Module):
    """``Q(s, a) = w * (sum(s) + 2 * sum(a))`` with ``w = 1``: hand-computable values."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, obs, actions):
        return self.w * (obs.sum(-1) + 2 * actions.sum(-1))


class ConstantActor(nn.Module):
    """``mu(s) = 0.5`` for every state (one action dimension)."""

    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.tensor([0.5]))

    def forward(self, obs):
        return self.b.expand(len(obs), 1)


# rows: bootstraps 3 steps; terminated inside its window (no bootstrap); truncated after 2
# steps (still bootstraps, with gamma ** 2)
HAND = NStepBatch(obs=np.array([[1.0], [0.0], [2.0]], np.float32),
                  actions=np.array([[0.5], [-1.0], [0.0]], np.float32),
                  rewards=np.array([1.0, 2.0, -1.0], np.float32),
                  next_obs=np.array([[3.0], [4.0], [1.0]], np.float32),
                  terminations=np.array([0.0, 1.0, 0.0], np.float32),
                  discounts=np.array([0.9 ** 3, 0.9 ** 2, 0.9 ** 2], np.float32))
# Q'(s', mu'(s')) = s' + 1; Q(s, a) = s + 2a
HAND_TARGETS = np.array([1 + 0.9 ** 3 * 4, 2.0, -1 + 0.9 ** 2 * 2])
HAND_Q = np.array([2.0, -2.0, 2.0])


def test_critic_targets_and_td_errors_by_hand():
    loss, td = ddpg_critic_loss(SumCritic(), ConstantActor(), SumCritic(),
                                td_tensors(HAND, None, CPU))
    np.testing.assert_allclose(td.numpy(), HAND_TARGETS - HAND_Q, rtol=1e-6)
    assert loss.item() == pytest.approx(np.mean((HAND_TARGETS - HAND_Q) ** 2), rel=1e-6)
    np.testing.assert_allclose(ddpg_td_errors(ConstantActor(), SumCritic(), SumCritic(), HAND),
                               np.abs(HAND_TARGETS - HAND_Q), rtol=1e-6)


def test_importance_weighted_critic_loss_by_hand():
    w = torch.tensor([0.5, 1.0, 0.25])
    loss, _ = ddpg_critic_loss(SumCritic(), ConstantActor(), SumCritic(),
                               td_tensors(HAND, None, CPU), w)
    expected = np.mean(w.numpy() * (HAND_TARGETS - HAND_Q) ** 2)
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_one_step_batch_bootstraps_with_gamma():
    batch = Batch(*HAND[:5])
    _, td = ddpg_critic_loss(SumCritic(), ConstantActor(), SumCritic(),
                             td_tensors(batch, 0.5, CPU))
    np.testing.assert_allclose(td.numpy(), np.array([1 + 0.5 * 4, 2.0, -1 + 0.5 * 2]) - HAND_Q)


def test_actor_loss_is_minus_q_and_its_step_climbs_the_critic():
    torch.manual_seed(0)
    actor = DeterministicActor(2, 1, (8,), LOW, HIGH)
    critic = SumCritic()  # increasing in the action: a step must raise the actions
    obs = torch.randn(32, 2)
    loss = ddpg_actor_loss(actor, critic, obs)
    assert loss.item() == pytest.approx(-critic(obs, actor(obs)).mean().item())
    before = actor(obs).mean().item()
    opt = torch.optim.SGD(actor.parameters(), lr=0.1)
    loss.backward()
    opt.step()
    assert actor(obs).mean().item() > before
    assert critic.w.grad is not None  # (the learner freezes the critic for this step)


def test_actor_stays_in_the_box():
    actor = DeterministicActor(3, 2, (8,), np.array([-2.0, 0.0]), np.array([2.0, 1.0]))
    actions = actor(torch.randn(500, 3) * 100)
    assert (actions[:, 0].abs() <= 2).all() and (actions[:, 1] >= 0).all()
    assert (actions[:, 1] <= 1).all()
    torch.testing.assert_close(actor.deterministic(torch.zeros(1, 3)),
                               actor(torch.zeros(1, 3)).detach())


def _random_batch(n=8, seed=0):
    rng = np.random.default_rng(seed)
    return NStepBatch(rng.normal(size=(n, 3)).astype(np.float32),
                      rng.uniform(-2, 2, size=(n, 1)).astype(np.float32),
                      rng.normal(size=n).astype(np.float32),
                      rng.normal(size=(n, 3)).astype(np.float32),
                      (rng.random(n) < 0.2).astype(np.float32),
                      np.full(n, 0.99 ** 3, np.float32))


def _learner(config=SMALL, seed=0):
    torch.manual_seed(seed)
    return DDPGLearner(3, 1, LOW, HIGH, config)


def test_update_moves_every_network_and_polyak_averages_the_targets():
    learner = _learner()
    old_targets = [copy.deepcopy(learner.actor_target), copy.deepcopy(learner.critic_target)]
    before = [copy.deepcopy(learner.actor), copy.deepcopy(learner.critic)]
    metrics = learner.update(_random_batch())
    assert metrics._fields == ("critic_loss", "actor_loss", "q_mean")
    assert metrics.loss is metrics.critic_loss  # what the loops log
    assert all(math.isfinite(v.item()) for v in metrics)
    assert learner.updates == 1
    tau = SMALL.tau
    for old_t, new_t, old, new in zip(old_targets, (learner.actor_target, learner.critic_target),
                                      before, (learner.actor, learner.critic)):
        for p_old_t, p_new_t, p_old, p in zip(old_t.parameters(), new_t.parameters(),
                                              old.parameters(), new.parameters()):
            assert not torch.equal(p_old, p)  # the online network moved
            torch.testing.assert_close(p_new_t, p_old_t + tau * (p - p_old_t))


def test_update_prioritized_returns_the_hand_td_errors_and_weighted_loss():
    learner = _learner()
    learner.update(_random_batch(seed=1))  # targets now differ from the online networks
    batch, w = _random_batch(seed=2), np.linspace(0.2, 1.0, 8).astype(np.float32)
    t = td_tensors(batch, None, CPU)
    with torch.no_grad():
        next_q = learner.critic_target(t.next_obs, learner.actor_target(t.next_obs))
        hand = (t.rewards + t.discounts * (1 - t.terminations) * next_q
                - learner.critic(t.obs, t.actions)).numpy()
    metrics, td = learner.update_prioritized(batch, w)
    assert td.shape == (8,) and isinstance(metrics.critic_loss, float)
    np.testing.assert_allclose(td, np.abs(hand), rtol=1e-5, atol=1e-6)
    assert metrics.critic_loss == pytest.approx(float(np.mean(w * hand ** 2)), rel=1e-5)


def test_actor_side_priorities_equal_the_learners():
    learner = _learner()
    learner.update(_random_batch(seed=1))
    model = DDPGPriorityModel(3, 1, LOW, HIGH, SMALL)
    model.load(learner.get_priority_weights())
    batch = _random_batch(seed=3)
    actor_side = model.td_errors(batch)
    _, learner_side = learner.update_prioritized(batch, np.ones(8, np.float32))
    np.testing.assert_allclose(actor_side, learner_side, rtol=1e-6, atol=1e-7)
    with pytest.raises(KeyError, match="get_priority_weights"):
        model.load(learner.get_weights())


def test_one_step_batch_equals_nstep_batch_with_discount_gamma():
    a, b = _learner(), _learner()
    batch = _random_batch()
    a.update(Batch(*batch[:5]))
    b.update(NStepBatch(*batch[:5], np.full(8, SMALL.gamma, np.float32)))
    for pa, pb in zip(a.critic.parameters(), b.critic.parameters()):
        torch.testing.assert_close(pa, pb)


def test_state_dict_round_trip():
    a = _learner()
    a.update(_random_batch())
    b = _learner(seed=1)
    # a deep copy, as a checkpoint file gives: Adam's load_state_dict keeps the tensors it is
    # given, so two live learners would otherwise share their moment estimates
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    assert b.updates == 1
    batch = _random_batch(seed=4)
    ma, mb = a.update(batch), b.update(batch)
    assert all(torch.equal(x, y) for x, y in zip(ma, mb, strict=True))
    for pa, pb in zip(a.actor_target.parameters(), b.actor_target.parameters()):
        assert torch.equal(pa, pb)


def test_exploration_warm_up_noise_and_bounds():
    actor = DeterministicActor(3, 1, (8,), LOW, HIGH)
    obs = np.random.default_rng(0).normal(size=(4000, 3)).astype(np.float32)
    mean = actor.deterministic(torch.as_tensor(obs)).numpy()
    rng = np.random.default_rng(0)
    warm = gaussian_exploration_policy(actor, rng, LOW, HIGH, 0.2, lambda: 1.0)(obs)
    assert warm.dtype == np.float32 and abs(warm.mean()) < 0.1 and warm.std() > 1.0
    noisy = gaussian_exploration_policy(actor, rng, LOW, HIGH, 0.2, lambda: 0.0)(obs)
    assert (noisy >= -2).all() and (noisy <= 2).all()
    assert np.std(noisy - mean) == pytest.approx(0.2, rel=0.1)
    exact = gaussian_exploration_policy(actor, rng, LOW, HIGH, 0.0, lambda: 0.0)(obs)
    np.testing.assert_allclose(exact, mean, rtol=1e-6)


def test_spec_noise_scale_and_warm_up():
    spec = DDPGSpec(DDPGConfig(noise_sigma=0.1, learning_starts=500))
    env = type("E", (), {"action_space": type("S", (), {"low": LOW, "high": HIGH})()})()
    np.testing.assert_allclose(spec.noise_std(env), [0.2])
    assert spec.random_action_prob(499) == 1.0 and spec.random_action_prob(500) == 0.0


BAD = [(dict(actor_lr=0.0), "actor_lr"), (dict(critic_lr=float("nan")), "critic_lr"),
       (dict(tau=0.0), "tau"), (dict(tau=1.5), "tau"), (dict(gamma=1.0), "gamma"),
       (dict(noise_sigma=-0.1), "noise_sigma"), (dict(noise_sigma="0.1"), "noise_sigma"),
       (dict(env_id="Nope-v0"), "env_id"), (dict(hidden=(0,)), "hidden"),
       (dict(batch_size=512, buffer_size=256, learning_starts=600), "batch_size"),
       (dict(learning_starts=30_000), "learning_starts"), (dict(eval_episodes=0), "eval_episodes")]


@pytest.mark.parametrize("kwargs, field", BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
def test_config_rejects_bad_values(kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field}=.*Fix: "):
        DDPGConfig(**kwargs)


def test_config_is_frozen_and_has_the_replay_fields():
    cfg = DDPGConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.gamma = 0.5
    assert (cfg.env_id, cfg.eval_episodes, cfg.target_return) == ("Pendulum-v1", 10, -200.0)


def test_short_single_process_run_is_reproducible():
    cfg = DDPGConfig(hidden=(32, 32), batch_size=32, total_steps=600, learning_starts=200,
                     eval_every=300, eval_episodes=2, target_return=None)
    a, b = train_single_process(DDPGSpec(cfg)), train_single_process(DDPGSpec(cfg))
    assert a.env_steps == 600 and a.learner.updates == 400
    assert a.history.episode_returns == b.history.episode_returns  # 3 Pendulum episodes
    assert a.history.eval_returns == b.history.eval_returns and len(a.history.eval_steps) == 2
    assert a.history.losses == b.history.losses and all(map(math.isfinite, a.history.losses))
