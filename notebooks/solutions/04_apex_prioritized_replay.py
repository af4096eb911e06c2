"""Solutions to notebook 04's coding exercises."""

import numpy as np


def weights_from_definition(stored, sampled, beta):
    """``(N P(i)) ** -beta`` of the sampled items, divided by the largest such value over every
    stored item (the least likely one)."""
    stored = np.asarray(stored, dtype=float)
    n_times_p = len(stored) * stored / stored.sum()  # N * P(i) for every stored item
    weights = n_times_p ** -beta
    return weights[np.asarray(sampled)] / weights.max()


def nstep_window(rewards, terminations, ends, gamma, n):
    """Sum ``gamma ** j * r_{t+j}`` over ``j < k``, where ``k = n`` or the step after the first
    episode end; the bootstrap factor ``gamma ** k``; whether that last step terminated."""
    reward_sum, terminated = 0.0, 0.0
    for j in range(n):
        reward_sum += gamma**j * rewards[j]
        terminated = float(terminations[j])
        if ends[j]:
            break
    return reward_sum, gamma ** (j + 1), terminated
