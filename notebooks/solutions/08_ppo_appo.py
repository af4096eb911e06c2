"""Solutions to notebook 08's coding exercises."""

import numpy as np


def clipped_objective(ratios, advantages, eps):
    """Elementwise ``min(r A, clip(r, 1 - eps, 1 + eps) A)`` of two numpy arrays."""
    return np.minimum(ratios * advantages, np.clip(ratios, 1 - eps, 1 + eps) * advantages)


def gae_one_env(rewards, values, terminated, last_value, gamma, lam):
    """``(T,)`` GAE(lambda) advantages of one environment's fragment."""
    advantages = np.zeros(len(rewards))
    next_value, next_advantage = last_value, 0.0
    for t in range(len(rewards) - 1, -1, -1):
        alive = 1.0 - terminated[t]
        delta = rewards[t] + gamma * alive * next_value - values[t]
        next_advantage = delta + gamma * lam * alive * next_advantage
        advantages[t] = next_advantage
        next_value = values[t]
    return advantages
