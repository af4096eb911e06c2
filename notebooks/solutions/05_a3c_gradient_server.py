"""Solutions to notebook 05's coding exercises."""

import numpy as np
import torch


def nstep_returns_one_env(rewards, terminated, truncated, final_values, last_value, gamma):
    """``R_t = r_t + gamma * R_{t+1}``, ``R_T = V(s_T)``; cut at a termination, bootstrapped
    from the real final observation's value at a truncation."""
    returns = np.zeros(len(rewards))
    following = last_value
    for t in range(len(rewards) - 1, -1, -1):
        if terminated[t]:
            following = 0.0
        elif truncated[t]:
            following = final_values[t]
        returns[t] = rewards[t] + gamma * following
        following = returns[t]
    return returns


def mean_entropy(logits):
    """``-sum_a p log p`` per row, averaged over the batch."""
    log_p = torch.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(-1).mean()
