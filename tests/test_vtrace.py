"""V-trace against the paper's definition, written out as plain Python loops (no Ray, fast)."""

import math

import numpy as np
import pytest
import torch

from rlkit.algos.vtrace import nstep_returns, vtrace


def random_inputs(T, B, seed, p_term=0.15, p_trunc=0.15, gamma=0.9):
    rng = np.random.default_rng(seed)
    f = lambda *shape: torch.tensor(rng.normal(size=shape), dtype=torch.float64)  # noqa: E731
    terminated = rng.random((T, B)) < p_term
    truncated = (rng.random((T, B)) < p_trunc) & ~terminated
    return dict(
        behaviour_log_probs=f(T, B) * 0.5 - 1.0,
        target_log_probs=f(T, B) * 0.5 - 1.0,
        rewards=f(T, B),
        values=f(T, B),
        bootstrap_value=f(B),
        discounts=torch.tensor(gamma * (1.0 - terminated), dtype=torch.float64),
        truncations=torch.tensor(truncated, dtype=torch.float64),
        final_values=f(T, B),
    )


def paper_vtrace(x, rho_bar, c_bar):
    """Definition 1 of the paper, one (s, t) pair at a time:
    v_s = V(x_s) + sum_{t >= s} (prod_{i=s}^{t-1} gamma_i c_i) delta_t, the sum stopping at the
    episode's end or the trajectory's end; delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))."""
    n = {k: v.numpy() for k, v in x.items()}
    T, B = n["rewards"].shape
    vs, adv = np.zeros((T, B)), np.zeros((T, B))

    def next_value(t, b):  # V(x_{t+1}) as step t sees it
        if n["truncations"][t, b]:
            return n["final_values"][t, b]
        return n["bootstrap_value"][b] if t == T - 1 else n["values"][t + 1, b]

    def ratio(t, b):
        return math.exp(n["target_log_probs"][t, b] - n["behaviour_log_probs"][t, b])

    for b in range(B):
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                rho = min(rho_bar, ratio(t, b))
                delta = rho * (n["rewards"][t, b] + n["discounts"][t, b] * next_value(t, b)
                               - n["values"][t, b])
                total += weight * delta
                if n["truncations"][t, b] or n["discounts"][t, b] == 0:
                    break  # the episode ended at t: nothing after it belongs to this one
                weight *= n["discounts"][t, b] * min(c_bar, ratio(t, b))
            vs[s, b] = n["values"][s, b] + total
        for s in range(T):
            ends = n["truncations"][s, b] or n["discounts"][s, b] == 0 or s == T - 1
            v_next = next_value(s, b) if ends else vs[s + 1, b]
            rho = min(rho_bar, ratio(s, b))
            adv[s, b] = rho * (n["rewards"][s, b] + n["discounts"][s, b] * v_next
                               - n["values"][s, b])
    return vs, adv


def call(x, rho_bar=1.0, c_bar=1.0):
    return vtrace(x["behaviour_log_probs"], x["target_log_probs"], x["rewards"], x["values"],
                  x["bootstrap_value"], x["discounts"], rho_bar, c_bar, x["truncations"],
                  x["final_values"])


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (1.5, 0.7), (0.8, 0.3), (5.0, 5.0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_vtrace_matches_the_papers_definition(seed, rho_bar, c_bar):
    x = random_inputs(T=7, B=5, seed=seed)
    assert x["truncations"].sum() > 0 and (x["discounts"] == 0).sum() > 0  # both kinds occur
    out = call(x, rho_bar, c_bar)
    vs, adv = paper_vtrace(x, rho_bar, c_bar)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-10, atol=1e-10)


def discounted_returns(x):
    """n-step returns to the end of each episode or trajectory, by a forward sum."""
    n = {k: v.numpy() for k, v in x.items()}
    T, B = n["rewards"].shape
    out = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            g, scale = 0.0, 1.0
            for t in range(s, T):
                g += scale * n["rewards"][t, b]
                scale *= n["discounts"][t, b]
                if n["truncations"][t, b]:
                    g += scale * n["final_values"][t, b]
                    break
                if scale == 0:
                    break
                if t == T - 1:
                    g += scale * n["bootstrap_value"][b]
            out[s, b] = g
    return out


def test_on_policy_vtrace_is_the_nstep_return():
    x = random_inputs(T=9, B=4, seed=3)
    x["target_log_probs"] = x["behaviour_log_probs"].clone()
    expected = discounted_returns(x)
    np.testing.assert_allclose(call(x).vs.numpy(), expected, rtol=1e-10, atol=1e-10)
    # the "no correction" baseline gives the same n-step returns, whatever the policies
    y = random_inputs(T=9, B=4, seed=3)
    plain = nstep_returns(y["rewards"], y["values"], y["bootstrap_value"], y["discounts"],
                          y["truncations"], y["final_values"])
    np.testing.assert_allclose(plain.vs.numpy(), expected, rtol=1e-10, atol=1e-10)


def test_c_bar_zero_gives_one_step_td_targets():
    x = random_inputs(T=6, B=3, seed=4)
    x["target_log_probs"] = x["behaviour_log_probs"].clone()  # rho = 1
    out = call(x, rho_bar=1.0, c_bar=0.0)
    v = x["values"]
    next_v = torch.cat([v[1:], x["bootstrap_value"][None]])
    next_v = torch.where(x["truncations"] > 0, x["final_values"], next_v)
    torch.testing.assert_close(out.vs, x["rewards"] + x["discounts"] * next_v)


def test_handmade_two_steps():
    # one trajectory, T = 2, gamma = 0.5; pi/mu = 2 at step 0 and 0.5 at step 1
    out = vtrace(behaviour_log_probs=torch.log(torch.tensor([[0.25], [0.8]])),
                 target_log_probs=torch.log(torch.tensor([[0.5], [0.4]])),
                 rewards=torch.tensor([[1.0], [2.0]]), values=torch.tensor([[3.0], [4.0]]),
                 bootstrap_value=torch.tensor([6.0]), discounts=torch.tensor([[0.5], [0.5]]))
    # rho0 = c0 = 1 (clipped), rho1 = c1 = 0.5
    # delta1 = 0.5 * (2 + 0.5*6 - 4) = 0.5;  v1 = 4 + 0.5 = 4.5
    # delta0 = 1 * (1 + 0.5*4 - 3) = 0;      v0 = 3 + 0 + 0.5*1*0.5 = 3.25
    torch.testing.assert_close(out.vs, torch.tensor([[3.25], [4.5]]))
    # advantages: rho0 * (1 + 0.5*4.5 - 3) = 0.25; rho1 * (2 + 0.5*6 - 4) = 0.5
    torch.testing.assert_close(out.pg_advantages, torch.tensor([[0.25], [0.5]]))


def test_truncation_bootstraps_from_the_final_observation_not_the_next_episode():
    ones = torch.ones(3, 1)
    common = dict(behaviour_log_probs=0 * ones, target_log_probs=0 * ones,
                  rewards=ones, values=torch.tensor([[0.0], [100.0], [0.0]]),
                  bootstrap_value=torch.tensor([0.0]), discounts=0.5 * ones)
    # step 0 was cut by a time limit; row 1 is a new episode whose first state is worth 100
    out = vtrace(**common, truncations=torch.tensor([[1.0], [0.0], [0.0]]),
                 final_values=torch.tensor([[8.0], [-1.0], [-1.0]]))
    assert out.vs[0, 0].item() == pytest.approx(1 + 0.5 * 8)  # not 1 + 0.5 * v_1
    # a termination at step 0 instead: no bootstrap at all
    term = vtrace(**{**common, "discounts": torch.tensor([[0.0], [0.5], [0.5]])})
    assert term.vs[0, 0].item() == pytest.approx(1.0)
    # with no episode end the trace runs through: 1 + 0.5 * v_1 where v_1 = 1 + 0.5 * v_2
    cont = vtrace(**common)
    assert cont.vs[0, 0].item() == pytest.approx(1 + 0.5 * (1 + 0.5 * 1))


def test_bad_inputs_name_the_field_and_the_fix():
    x = random_inputs(T=4, B=2, seed=5)
    with pytest.raises(ValueError, match=r"rho_bar=0.5 and c_bar=1.0.*Fix: raise rho_bar"):
        call(x, rho_bar=0.5, c_bar=1.0)
    empty = {k: (v[:0] if v.dim() == 2 else v) for k, v in x.items()}
    with pytest.raises(ValueError, match=r"T >= 1.*Fix"):
        call(empty)
    short = dict(x, rewards=x["rewards"][:3])
    with pytest.raises(ValueError, match=r"rewards has shape \(3, 2\).*must be \(4, 2\).*Fix"):
        call(short)
    with pytest.raises(ValueError, match=r"bootstrap_value has shape.*must be \(2,\)"):
        call(dict(x, bootstrap_value=x["bootstrap_value"][:1]))
    with pytest.raises(ValueError, match=r"final_values.*Fix"):
        vtrace(x["behaviour_log_probs"], x["target_log_probs"], x["rewards"], x["values"],
               x["bootstrap_value"], x["discounts"], truncations=x["truncations"])
