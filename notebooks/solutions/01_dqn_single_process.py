"""Solutions to notebook 01's coding exercises."""

import torch


def double_dqn_target(q, q_target, rewards, next_obs, terminations, gamma):
    """``r + gamma (1 - term) Q_target(s', argmax_a Q(s', a))``, all ``(B,)``, no gradient."""
    with torch.no_grad():
        best = q(next_obs).argmax(dim=1, keepdim=True)           # (B, 1): chosen by online net
        next_values = q_target(next_obs).gather(1, best).squeeze(1)  # (B,): valued by target
        return rewards + gamma * (1.0 - terminations) * next_values


def epsilon_at(step, start, end, decay_steps):
    """``start`` falling linearly to ``end`` over ``decay_steps`` env steps, then ``end``."""
    if decay_steps <= 0 or step >= decay_steps:
        return end
    return start + (end - start) * step / decay_steps
