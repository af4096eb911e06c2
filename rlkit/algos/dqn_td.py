"""DQN's TD arithmetic, shared by the learner and the Ape-X actors: targets (one-step or
n-step), the Huber or squared loss with optional importance weights, and per-transition TD
errors that an actor computes as priorities with its copy of the online and target networks.

:mod:`rlkit.algos.dqn` re-exports everything here; import it from there.
"""

from __future__ import annotations

import copy
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F

from rlkit.algos.prioritized_td import TDTensors, load_prefixed_weights, td_tensors, weighted_mean
from rlkit.core.common import bootstrap_target
from rlkit.core.networks import QNetwork
from rlkit.core.types import NStepBatch, Weights


class QNetworkConfig(Protocol):
    """The fields of ``DQNConfig`` that the priority model reads."""

    hidden: tuple[int, ...]
    double_dqn: bool


def dqn_targets(q: QNetwork, q_target: QNetwork, rewards: torch.Tensor,
                next_obs: torch.Tensor, terminations: torch.Tensor,
                gamma: float | torch.Tensor, double: bool) -> torch.Tensor:
    """DQN targets for a batch, computed without gradient.

    Plain DQN uses ``max_a Q_target(s', a)``. Double DQN picks the action with the online net
    and evaluates it with the target net, ``Q_target(s', argmax_a Q(s', a))``, which reduces the
    overestimation that taking a max over noisy estimates causes.

    Args:
        q, q_target: Online and target networks.
        rewards: ``(B,)`` (n-step: the discounted sum of the window's rewards);
            next_obs: ``(B, *obs_shape)``; terminations: ``(B,)``.
        gamma: The bootstrap factor: a float discount, or ``(B,)`` per-transition
            ``gamma ** k_i`` for n-step transitions.
        double: Use the Double-DQN action selection.

    Returns:
        ``(B,)`` targets.
    """
    with torch.no_grad():
        next_q_target = q_target(next_obs)  # (B, n_actions)
        if double:
            best = q(next_obs).argmax(dim=1, keepdim=True)  # (B, 1)
            next_values = next_q_target.gather(1, best).squeeze(1)
        else:
            next_values = next_q_target.max(dim=1).values
        return bootstrap_target(rewards, terminations, next_values, gamma)


def dqn_q_and_targets(q: QNetwork, q_target: QNetwork, batch: TDTensors, double: bool
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """``Q(s, a)`` of the taken actions (with gradient) and their targets (without).

    The one place the learner (:meth:`rlkit.algos.dqn.DQNLearner.update`) and the Ape-X
    actors (:func:`dqn_td_errors`) compute TD errors from, so both give the same priorities.

    Returns:
        ``(q_taken (B,), targets (B,))``.
    """
    targets = dqn_targets(q, q_target, batch.rewards, batch.next_obs, batch.terminations,
                          batch.discounts, double)
    q_taken = q(batch.obs).gather(1, batch.actions.long().unsqueeze(1)).squeeze(1)
    return q_taken, targets


def dqn_loss(q_taken: torch.Tensor, targets: torch.Tensor, huber: bool,
             importance_weights: torch.Tensor | None = None) -> torch.Tensor:
    """Huber (smooth L1) or squared TD loss, averaged over the batch.

    Args:
        q_taken, targets: ``(B,)`` each.
        huber: Huber loss; False: squared error.
        importance_weights: ``(B,)`` prioritized replay's ``w_i``: the loss is then
            ``mean_i(w_i * loss_i)``; ``None``: the plain mean.
    """
    loss_fn = F.smooth_l1_loss if huber else F.mse_loss
    if importance_weights is None:
        return loss_fn(q_taken, targets)
    return weighted_mean(loss_fn(q_taken, targets, reduction="none"), importance_weights)


@torch.no_grad()
def dqn_td_errors(q: QNetwork, q_target: QNetwork, batch: NStepBatch, double: bool
                  ) -> np.ndarray:
    """``|target - Q(s, a)|`` per transition: an Ape-X actor's priorities for its own data.

    Args:
        q, q_target: Online and target networks (an actor's copies: see
            :class:`DQNPriorityModel`).
        batch: ``B`` n-step transitions (their ``discounts`` give the bootstrap factor).
        double: Double-DQN targets, as the learner's ``config.double_dqn``.

    Returns:
        ``(B,)`` float32, equal to what :meth:`rlkit.algos.dqn.DQNLearner.update_prioritized`
        returns for the same weights and batch.
    """
    device = next(q.parameters()).device
    q_taken, targets = dqn_q_and_targets(q, q_target, td_tensors(batch, None, device), double)
    return (targets - q_taken).abs().cpu().numpy()


class DQNPriorityModel:
    """An Ape-X actor's copy of the online and target Q-networks, to prioritize its own
    transitions before they reach the replay (Horgan et al. 2018, actor-side priorities).

    Args:
        obs_dim: Observation size.
        n_actions: Number of discrete actions.
        config: The run's ``DQNConfig`` (its ``hidden`` and ``double_dqn`` are read).
        device: Where the networks live (an actor: the CPU).

    Attributes:
        q: The online network; the actor may act with it too.
        q_target: The target network.
    """

    def __init__(self, obs_dim: int, n_actions: int, config: QNetworkConfig,
                 device: str | torch.device = "cpu") -> None:
        self.config = config
        self.q = QNetwork(obs_dim, n_actions, config.hidden).to(device).requires_grad_(False)
        self.q_target = copy.deepcopy(self.q)

    def load(self, weights: Weights) -> None:
        """Load :meth:`rlkit.algos.dqn.DQNLearner.get_priority_weights`' output."""
        load_prefixed_weights({"q": self.q, "q_target": self.q_target}, weights)

    def td_errors(self, batch: NStepBatch) -> np.ndarray:
        """``(B,)`` float32 priorities ``|target - Q(s, a)|``: see :func:`dqn_td_errors`."""
        return dqn_td_errors(self.q, self.q_target, batch, self.config.double_dqn)
