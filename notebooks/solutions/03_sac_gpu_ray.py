"""Solutions to notebook 03's coding exercises."""

import math

import torch
import torch.nn.functional as F


def squashed_log_prob(u, mean, log_std, scale):
    """``log pi(a|s)`` of ``a = bias + scale * tanh(u)``, ``u ~ N(mean, exp(log_std))``:
    the Gaussian log-density of ``u`` minus ``sum log(scale * (1 - tanh(u)^2))``; ``(B,)``."""
    gaussian = (-0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std
                - 0.5 * math.log(2 * math.pi)).sum(-1)
    # log(1 - tanh(u)^2) written stably: 2 (log 2 - u - softplus(-2u))
    log_det = (2 * (math.log(2) - u - F.softplus(-2 * u)) + torch.log(scale)).sum(-1)
    return gaussian - log_det


def temperature_loss(log_alpha, log_prob, target_entropy):
    """``-log_alpha (log pi + target_entropy)``, averaged; no gradient into the policy."""
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()
