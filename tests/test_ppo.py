"""PPO on hand-made numbers (the clipped surrogate, GAE(lambda)), PPO against A2C on the same
batch, the config's rules, and the one-process loop (no Ray)."""

import dataclasses

import numpy as np
import pytest
import torch

from rlkit.algos.a2c import A2CConfig, A2CLearner, nstep_advantages
from rlkit.algos.actor_critic import sampling_policy
from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.ppo import PPOConfig, PPOLearner, clipped_surrogate
from rlkit.envs.runner import EnvRunner
from rlkit.train.ppo import train_ppo

EPS = 0.2


def surrogate_and_grad(ratios, advantages):
    """The loss at the given ratios, and its gradient with respect to ``log pi``."""
    log_probs = torch.log(torch.tensor(ratios, dtype=torch.float64)).requires_grad_()
    loss = clipped_surrogate(log_probs, torch.zeros(len(ratios), dtype=torch.float64),
                             torch.tensor(advantages, dtype=torch.float64), EPS)
    loss.backward()
    return loss.item(), log_probs.grad.numpy()


def test_clipped_surrogate_positive_advantage():
    # A = +1: min(r, clip(r, 0.8, 1.2)) = 0.5, 1.1, 1.2 -> the gain above 1.2 is not counted
    loss, grad = surrogate_and_grad([0.5, 1.1, 1.5], [1.0, 1.0, 1.0])
    assert loss == pytest.approx(-(0.5 + 1.1 + 1.2) / 3)
    # d(-r A / 3)/d log r = -r A / 3 where the unclipped term is the min; 0 where clipped
    np.testing.assert_allclose(grad, [-0.5 / 3, -1.1 / 3, 0.0])


def test_clipped_surrogate_negative_advantage():
    # A = -1: min(-r, -clip(r)) = -0.8 (r = 0.5 is clipped: it already fell far enough),
    # -1.1, -1.5 (r = 1.5 is NOT clipped: a step that made a bad action likelier is undone)
    loss, grad = surrogate_and_grad([0.5, 1.1, 1.5], [-1.0, -1.0, -1.0])
    assert loss == pytest.approx(-(-0.8 - 1.1 - 1.5) / 3)
    np.testing.assert_allclose(grad, [0.0, 1.1 / 3, 1.5 / 3])


def test_clipped_surrogate_at_ratio_one_has_the_policy_gradient():
    loss, grad = surrogate_and_grad([1.0, 1.0], [2.0, -3.0])
    assert loss == pytest.approx(-(2.0 - 3.0) / 2)
    np.testing.assert_allclose(grad, [-2.0 / 2, 3.0 / 2])


def gae(rewards, values, terms, truncs, final_values, last, gamma, lam):
    arrays = [np.asarray(a, dtype=np.float64).reshape(-1, 1)
              for a in (rewards, values, terms, truncs, final_values)]
    return nstep_advantages(*arrays, np.asarray([last], dtype=np.float64), gamma, lam)


# four steps: step 1 terminates, step 2 is truncated with V(final obs) = 7, V(s_T) = 10
R, V = [1.0, 2.0, 3.0, 4.0], [0.5, 1.0, 1.5, 2.0]
TERM, TRUNC, FINAL = [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 7.0, 0]
G = 0.9


def test_gae_lambda_zero_is_the_one_step_td_error():
    _, adv = gae(R, V, TERM, TRUNC, FINAL, 10.0, G, 0.0)
    delta = [1 + G * 1.0 - 0.5,  # V(s_1) = 1.0
             2 - 1.0,  # terminated: no bootstrap
             3 + G * 7.0 - 1.5,  # truncated: V of the real final observation
             4 + G * 10.0 - 2.0]  # last step: V(s_T)
    np.testing.assert_allclose(adv[:, 0], delta)


def test_gae_lambda_one_is_the_monte_carlo_return_to_the_episode_end():
    returns, adv = gae(R, V, TERM, TRUNC, FINAL, 10.0, G, 1.0)
    np.testing.assert_allclose(returns[:, 0], [1 + G * 2, 2, 3 + G * 7, 4 + G * 10])
    np.testing.assert_allclose(adv[:, 0], returns[:, 0] - V)


def test_gae_is_the_discounted_sum_of_td_errors():
    lam = 0.5
    _, adv = gae(R, V, TERM, TRUNC, FINAL, 10.0, G, lam)
    _, delta = gae(R, V, TERM, TRUNC, FINAL, 10.0, G, 0.0)
    d = delta[:, 0]
    # each episode end (termination at 1, truncation at 2) stops the sum at its own step
    np.testing.assert_allclose(adv[:, 0], [d[0] + G * lam * d[1], d[1], d[2], d[3]])
    # without episode ends the sum runs to the fragment's end
    _, adv = gae(R, V, [0] * 4, [0] * 4, [0] * 4, 10.0, G, lam)
    _, delta = gae(R, V, [0] * 4, [0] * 4, [0] * 4, 10.0, G, 0.0)
    want = [sum((G * lam) ** k * delta[t + k, 0] for k in range(4 - t)) for t in range(4)]
    np.testing.assert_allclose(adv[:, 0], want)


def test_one_epoch_one_minibatch_is_the_a2c_update():
    """At ratio 1 the clipped surrogate's gradient is A2C's policy gradient; with lambda 1 the
    advantages are A2C's n-step ones: the same batch gives the same weights after the step."""
    a2c_config = A2CConfig(envs_per_worker=4, n_steps=32, gamma=0.97, learning_rate=3e-3,
                           entropy_coef=0.01)
    config = PPOConfig(num_workers=1, batch_fragments=1, envs_per_worker=4, unroll_length=32,
                       gamma=0.97, learning_rate=3e-3, entropy_coef=0.01, gae_lambda=1.0,
                       epochs=1, minibatch_size=128,
                       value_coef=a2c_config.value_coef,
                       max_grad_norm=a2c_config.max_grad_norm)
    runner = EnvRunner("CartPole-v1", 3, "discrete", "test", 4)
    a2c = A2CLearner(runner.obs_dim, runner.action_dim, a2c_config)
    ppo = PPOLearner(runner.obs_dim, runner.action_dim, config)
    ppo.set_weights(a2c.get_weights())
    fragment = runner.run(32, sampling_policy(a2c.net, np.random.default_rng(0)),
                          fixed_length=True)
    runner.close()
    assert fragment.terminations.any() and fragment.resets.any()  # episode ends inside
    before = a2c.get_weights()
    a2c.apply_gradient(a2c.compute_gradient(fragment))
    ppo.update([fragment])
    after_a2c, after_ppo = a2c.get_weights(), ppo.get_weights()
    # the two sum the batch in different orders (PPO shuffles it), so float32 rounding differs
    # by ~1e-7 of a gradient; Adam's first step, lr * g / (|g| + eps), can turn that into up to
    # a few millionths where g is tiny: 1% of one step (lr = 3e-3) is the tolerance
    for name in before:
        assert not np.allclose(after_a2c[name], before[name])
        np.testing.assert_allclose(after_ppo[name], after_a2c[name], rtol=0, atol=3e-5,
                                   err_msg=name)


def test_without_the_clip_epochs_move_the_policy_ever_further_with_it_they_do_not():
    runner = EnvRunner("CartPole-v1", 5, "discrete", "test", 8)
    base = PPOConfig(num_workers=1, batch_fragments=1, envs_per_worker=8, unroll_length=32,
                     minibatch_size=64, learning_rate=3e-3)
    first = PPOLearner(runner.obs_dim, runner.action_dim, base)
    fragment = runner.run(32, sampling_policy(first.net, np.random.default_rng(1)),
                          fixed_length=True)
    runner.close()
    kl = {}
    for epochs in (1, 4, 10):
        for clip in (0.2, 1e6):  # 1e6: no ratio ever reaches the clip
            learner = PPOLearner(runner.obs_dim, runner.action_dim,
                                 dataclasses.replace(base, epochs=epochs, clip=clip))
            kl[epochs, clip] = learner.update([fragment]).approx_kl
            assert learner.updates == 1 and learner.sgd_steps == epochs * 4
    assert kl[1, 1e6] < kl[4, 1e6] < kl[10, 1e6]  # the same batch, reused: ever further
    assert max(kl[e, 0.2] for e in (1, 4, 10)) < 0.05  # the clip holds it near pi_old
    assert kl[10, 1e6] > 10 * kl[10, 0.2]


@pytest.mark.parametrize("field, value, words", [
    ("clip", 0.0, "clip"), ("clip", -0.1, "clip"), ("epochs", 0, "epochs"),
    ("gae_lambda", 1.5, "gae_lambda"), ("gae_lambda", -0.1, "gae_lambda"),
    ("minibatch_size", 257, "larger than one batch"),
    ("batch_fragments", 3, "multiple of num_workers")])
def test_config_rejects_bad_values_naming_the_field(field, value, words):
    with pytest.raises(ValueError, match=words) as err:
        PPOConfig(**{field: value})
    assert field in str(err.value) and "Fix:" in str(err.value)


def test_a_loss_overflowed_by_huge_rewards_names_their_size_and_the_fix():
    runner = EnvRunner("CartPole-v1", 3, "discrete", "test", 2)
    learner = PPOLearner(runner.obs_dim, runner.action_dim, PPOConfig(envs_per_worker=2))
    fragment = runner.run(8, sampling_policy(learner.net, np.random.default_rng(0)),
                          fixed_length=True)
    fragment.rewards[:] = 3e38  # finite, but their returns and squares overflow float32
    before = learner.get_weights()
    with pytest.raises(FloatingPointError, match=r"PPO loss became non-finite at batch 0.*"
                                                 r"largest \|reward\| in the batch 3e\+38. "
                                                 r"Fix: rewards that large"):
        learner.update([fragment])
    for name, value in learner.get_weights().items():  # refused before any step
        np.testing.assert_array_equal(value, before[name])


def test_train_ppo_is_reproducible_and_counts_its_steps():
    config = PPOConfig(total_steps=1_500, eval_every=1_000, eval_episodes=2, seed=4)
    first, second = train_ppo(config), train_ppo(config)
    assert first.env_steps >= 1_500 and len(first.history.eval_steps) == 2
    assert first.updates == len(first.diagnostics["approx_kl"])
    assert all(kl >= 0 for kl in first.diagnostics["approx_kl"])
    for name, value in first.weights.items():
        np.testing.assert_array_equal(value, second.weights[name])
    assert first.history.eval_returns == second.history.eval_returns


def test_train_ppo_rejects_a_config_of_another_algorithm():
    with pytest.raises(TypeError, match="PPOConfig"):
        train_ppo(A2CConfig())


def test_ppo_solves_cartpole():
    result = train_ppo(PPOConfig(seed=0))
    assert result.solved and result.eval_return >= 475
    assert result.env_steps <= 50_000


def test_gaussian_head_log_probs_by_hand_and_as_the_worker_computes_them():
    from rlkit.algos.policy_heads import (GaussianActorCritic, acting_policy, evaluate_actions,
                                          make_actor_critic)

    net = make_actor_critic(3, 2, (8,), "continuous")
    assert isinstance(net, GaussianActorCritic)
    with torch.no_grad():  # mean 0 everywhere, std 1 and e^-1
        net.actor[-1].weight.zero_()
        net.actor[-1].bias.zero_()
        net.log_std.copy_(torch.tensor([0.0, -1.0]))
    obs = torch.zeros(1, 3)
    log_p, ent, _ = evaluate_actions(net, obs, torch.tensor([[1.0, 0.0]]))
    half_log_2pi = 0.5 * np.log(2 * np.pi)
    assert log_p.item() == pytest.approx((-0.5 - half_log_2pi) + (1.0 - half_log_2pi), abs=1e-5)
    assert ent.item() == pytest.approx((0.5 + half_log_2pi) + (-1.0 + 0.5 + half_log_2pi),
                                       abs=1e-5)
    # the worker's numpy log-probabilities are the learner's, for the actions it sampled
    states = np.random.default_rng(1).standard_normal((64, 3)).astype(np.float32)
    actions, worker_log_p = acting_policy(net, np.random.default_rng(0))(states)
    assert actions.shape == (64, 2) and actions.dtype == np.float32
    learner_log_p = evaluate_actions(net, torch.as_tensor(states), torch.as_tensor(actions))[0]
    np.testing.assert_allclose(worker_log_p, learner_log_p.detach().numpy(), atol=1e-4)


def test_ppo_on_pendulum_runs_with_a_gaussian_policy():
    from rlkit.algos.policy_heads import GaussianActorCritic
    from rlkit.algos.ppo import PENDULUM

    config = dataclasses.replace(PENDULUM, total_steps=4000, eval_every=4000, eval_episodes=1)
    learner = PPOLearner(3, 1, config)
    assert isinstance(learner.net, GaussianActorCritic)
    result = train_ppo(config)
    # one batch: 4 envs x 1,024 rows, less the reset row after each 200-step episode
    assert result.updates == 1 and 4000 <= result.env_steps < 4096
    assert len(result.history.eval_returns) == 1 and result.history.eval_returns[0] < 0
    assert result.diagnostics["approx_kl"][0] > 0


def test_impala_refuses_a_continuous_env_naming_it():
    from rlkit.train.impala import train_impala

    with pytest.raises(ValueError, match=r"Pendulum-v1.*Discrete"):
        train_impala(IMPALAConfig(env_id="Pendulum-v1"))
