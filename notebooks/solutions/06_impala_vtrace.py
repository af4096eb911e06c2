"""Solutions to notebook 06's coding exercises."""

import torch


def nstep_targets(rewards, bootstrap_value, discounts):
    """``G_t = r_t + gamma_t G_{t+1}`` backwards from ``G_T = V(x_T)``; ``(T, B)``."""
    targets = torch.empty_like(rewards)
    ret = bootstrap_value
    for t in range(rewards.shape[0] - 1, -1, -1):
        ret = rewards[t] + discounts[t] * ret  # a termination (gamma_t = 0) cuts the sum
        targets[t] = ret
    return targets


def vtrace_targets(behaviour_log_probs, target_log_probs, rewards, values, bootstrap_value,
                   gamma, rho_bar=1.0, c_bar=1.0):
    """V-trace's ``v_s`` for trajectories without episode ends; all ``(T, B)`` but
    ``bootstrap_value`` ``(B,)``."""
    ratios = torch.exp(target_log_probs - behaviour_log_probs)
    rhos, cs = ratios.clamp(max=rho_bar), ratios.clamp(max=c_bar)
    next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)])
    deltas = rhos * (rewards + gamma * next_values - values)
    corrections, acc = torch.empty_like(values), torch.zeros_like(bootstrap_value)
    for t in range(values.shape[0] - 1, -1, -1):
        acc = deltas[t] + gamma * cs[t] * acc
        corrections[t] = acc
    return values + corrections
