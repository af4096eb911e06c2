"""A2C maths on hand-made numbers: n-step advantages, the loss terms, config checks (no Ray)."""

import numpy as np
import pytest
import torch

from rlkit.algos.a2c import A2CConfig, A2CLearner, a2c_loss, entropy, nstep_advantages, policy_loss
from rlkit.envs.runner import Fragment

G = 0.9


def advantages(rewards, values, terms, truncs, final_values, last_values):
    arrays = [np.asarray(a, dtype=np.float64).reshape(-1, 1)
              for a in (rewards, values, terms, truncs, final_values)]
    return nstep_advantages(*arrays, np.asarray([last_values], dtype=np.float64), G)


def test_nstep_without_episode_end_bootstraps_from_last_value():
    returns, adv = advantages([1, 2, 3], [0.5, 0.5, 0.5], [0, 0, 0], [0, 0, 0], [0, 0, 0], 10.0)
    r2 = 3 + G * 10
    r1 = 2 + G * r2
    r0 = 1 + G * r1
    np.testing.assert_allclose(returns[:, 0], [r0, r1, r2])
    np.testing.assert_allclose(adv[:, 0], [r0 - 0.5, r1 - 0.5, r2 - 0.5])


def test_nstep_termination_inside_fragment_cuts_the_return():
    # step 1 terminates: R_1 = r_1 (no bootstrap), R_0 = r_0 + G r_1; step 2 is a new episode
    returns, adv = advantages([1, 2, 3], [4, 5, 6], [0, 1, 0], [0, 0, 0], [0, 99, 0], 10.0)
    np.testing.assert_allclose(returns[:, 0], [1 + G * 2, 2, 3 + G * 10])
    np.testing.assert_allclose(adv[:, 0], [1 + G * 2 - 4, 2 - 5, 3 + G * 10 - 6])


def test_nstep_truncation_inside_fragment_bootstraps_from_final_observation():
    # step 1 is cut by a time limit: R_1 = r_1 + G V(final obs) = 2 + G * 7, not the next
    # episode's return and not 2
    returns, adv = advantages([1, 2, 3], [4, 5, 6], [0, 0, 0], [0, 1, 0], [0, 7, 0], 10.0)
    r1 = 2 + G * 7
    np.testing.assert_allclose(returns[:, 0], [1 + G * r1, r1, 3 + G * 10])
    np.testing.assert_allclose(adv[:, 0], returns[:, 0] - [4, 5, 6])


def test_nstep_termination_at_last_step_ignores_last_value():
    returns, _ = advantages([1, 1], [0, 0], [0, 1], [0, 0], [0, 0], 1000.0)
    np.testing.assert_allclose(returns[:, 0], [1 + G, 1])


def test_nstep_rejects_wrong_shapes():
    with pytest.raises(ValueError, match=r"rewards has shape \(3,\), but nstep_advantages "
                                         r"needs time-major \(T, B\).*Fix:"):
        nstep_advantages(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3),
                         np.zeros(1), G)


def test_policy_loss_gradient_raises_log_prob_of_positive_advantage_action():
    logits = torch.zeros(1, 2, requires_grad=True)
    log_probs = torch.log_softmax(logits, -1)[:, 0]  # action 0 taken
    policy_loss(log_probs, torch.tensor([2.0])).backward()
    stepped = logits.detach() - 0.1 * logits.grad  # one gradient-descent step
    assert torch.log_softmax(stepped, -1)[0, 0] > log_probs.detach()[0]
    # the sign flips with a negative advantage
    logits.grad = None
    log_probs = torch.log_softmax(logits, -1)[:, 0]
    policy_loss(log_probs, torch.tensor([-2.0])).backward()
    stepped = logits.detach() - 0.1 * logits.grad
    assert torch.log_softmax(stepped, -1)[0, 0] < log_probs.detach()[0]


def test_entropy_hand_values():
    uniform = torch.zeros(1, 4)
    assert entropy(uniform).item() == pytest.approx(np.log(4))
    p = np.array([0.2, 0.8])
    logits = torch.tensor(np.log(p), dtype=torch.float32)[None]
    assert entropy(logits).item() == pytest.approx(-(p * np.log(p)).sum(), rel=1e-6)
    assert entropy(torch.tensor([[50.0, -50.0]])).item() == pytest.approx(0.0, abs=1e-6)


def test_entropy_bonus_lowers_loss_and_pushes_toward_uniform():
    logits = torch.tensor([[1.0, -1.0]], requires_grad=True)
    args = (torch.zeros(1), torch.zeros(1, dtype=torch.int64), torch.zeros(1), torch.zeros(1))
    no_bonus, _ = a2c_loss(logits, *args, value_coef=0.5, entropy_coef=0.0)
    bonus, parts = a2c_loss(logits, *args, value_coef=0.5, entropy_coef=0.1)
    assert bonus.item() == pytest.approx(no_bonus.item() - 0.1 * parts["entropy"])
    bonus.backward()
    stepped = logits.detach() - 1.0 * logits.grad
    assert entropy(stepped) > entropy(logits.detach())


def test_value_term_is_weighted_mse():
    logits = torch.zeros(2, 2)
    loss, parts = a2c_loss(logits, torch.tensor([1.0, 3.0]), torch.tensor([0, 1]),
                           torch.tensor([2.0, 2.0]), torch.zeros(2), 0.5, 0.0)
    assert parts["value"] == pytest.approx(1.0)
    assert loss.item() == pytest.approx(0.5)


@pytest.mark.parametrize("field, value, fix", [
    ("n_steps", 0, "n_steps=0 must be an int >= 1"), ("entropy_coef", -0.01, "entropy_coef=0.01"),
    ("gamma", 1.0, "gamma=1.0 must be a finite number in [0, 1)"),
    ("learning_rate", float("nan"), "use e.g. learning_rate=0.001"),
    ("envs_per_worker", 2.5, "envs_per_worker")])
def test_config_rejects_bad_values_naming_the_field(field, value, fix):
    with pytest.raises(ValueError, match=field) as info:
        A2CConfig(**{field: value})
    assert fix in str(info.value)


def fragment(t=4, n=3, seed=0):
    """A hand-made fragment: env 0 is truncated at step 1 and reset at step 2 (a reset row);
    random terminations elsewhere."""
    rng = np.random.default_rng(seed)
    truncs = np.zeros((t, n), np.float32)
    truncs[1, 0] = 1
    terms = (rng.random((t, n)) < 0.2).astype(np.float32)
    terms[:3, 0] = 0
    resets = np.zeros((t, n), bool)
    resets[2, 0] = True
    return Fragment(obs=rng.normal(size=(t, n, 4)).astype(np.float32),
                    actions=rng.integers(0, 2, (t, n)), rewards=np.ones((t, n), np.float32),
                    terminations=terms, truncations=truncs,
                    next_obs=rng.normal(size=(t, n, 4)).astype(np.float32), resets=resets)


def test_a_reset_row_contributes_nothing_to_the_gradient():
    torch.manual_seed(0)
    learner = A2CLearner(4, 2, A2CConfig())
    base = fragment()
    changed = fragment()
    changed.obs[2, 0] += 5.0  # the reset row: its observation, action and reward are not a step
    changed.actions[2, 0] = 1 - changed.actions[2, 0]
    changed.rewards[2, 0] = 100.0
    np.testing.assert_allclose(learner.compute_gradient(base), learner.compute_gradient(changed),
                               rtol=1e-5, atol=1e-7)
    real_step = fragment()
    real_step.rewards[1, 0] = 100.0  # the truncated step before it is a real step: it counts
    assert not np.allclose(learner.compute_gradient(base), learner.compute_gradient(real_step))


def test_learner_gradient_is_flat_clipped_and_leaves_weights_alone():
    torch.manual_seed(0)
    learner = A2CLearner(4, 2, A2CConfig(max_grad_norm=1e-3))  # far below any raw norm here
    before = learner.get_weights()
    grad = learner.compute_gradient(fragment())
    n_params = sum(p.numel() for p in learner.net.parameters())
    assert grad.shape == (n_params,) and grad.dtype == np.float32
    assert np.linalg.norm(grad) == pytest.approx(1e-3, rel=1e-3)  # clipped to exactly the norm
    assert all(np.array_equal(before[k], v) for k, v in learner.get_weights().items())
    learner.apply_gradient(grad)
    assert learner.updates == 1
    assert any(not np.array_equal(before[k], v) for k, v in learner.get_weights().items())
    with pytest.raises(ValueError, match="entries"):
        learner.apply_gradient(np.zeros(n_params + 1, np.float32))


def test_learner_weights_round_trip():
    torch.manual_seed(0)
    a = A2CLearner(4, 2, A2CConfig())
    torch.manual_seed(1)
    b = A2CLearner(4, 2, A2CConfig())
    b.set_weights(a.get_weights())
    np.testing.assert_array_equal(a.compute_gradient(fragment()), b.compute_gradient(fragment()))


def test_a_gradient_is_n_steps_of_every_env():
    assert A2CConfig(n_steps=4, envs_per_worker=3).steps_per_gradient == 12
