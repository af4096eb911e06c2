"""DDPG's losses and TD errors, shared by the learner and the Ape-X actors, and the actors'
priority model (their copy of the four networks).

:mod:`rlkit.algos.ddpg` re-exports everything here; import it from there.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from rlkit.algos.prioritized_td import TDTensors, load_prefixed_weights, td_tensors, weighted_mean
from rlkit.core.common import bootstrap_target
from rlkit.core.networks import DeterministicActor, QCritic
from rlkit.core.types import NStepBatch, Weights


class HiddenConfig(Protocol):
    """The field of ``DDPGConfig`` that the priority model reads."""

    hidden: tuple[int, ...]


def ddpg_critic_loss(critic: QCritic, actor_target: DeterministicActor,
                     critic_target: QCritic, batch: TDTensors,
                     importance_weights: torch.Tensor | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Squared TD error of the critic against ``r + discount (1 - term) Q'(s', mu'(s'))``.

    The one place TD errors are computed (the learner's update and the Ape-X actors'
    priorities, :func:`ddpg_td_errors`). A truncation has ``term = 0`` and bootstraps.

    Args:
        critic: The online critic (gradients flow into it).
        actor_target, critic_target: The target networks (no gradient).
        batch: ``B`` transitions; ``batch.discounts`` is ``gamma`` or ``(B,)`` ``gamma ** k``.
        importance_weights: ``(B,)`` prioritized replay's ``w_i``; ``None``: plain mean.

    Returns:
        ``(loss, td_errors)``: the scalar ``mean_i(w_i * delta_i ** 2)`` and the ``(B,)``
        detached ``delta_i = target_i - Q(s_i, a_i)``.
    """
    with torch.no_grad():
        next_q = critic_target(batch.next_obs, actor_target(batch.next_obs))
        targets = bootstrap_target(batch.rewards, batch.terminations, next_q, batch.discounts)
    td_errors = targets - critic(batch.obs, batch.actions)
    return weighted_mean(td_errors ** 2, importance_weights), td_errors.detach()


def ddpg_actor_loss(actor: DeterministicActor, critic: QCritic, obs: torch.Tensor
                    ) -> torch.Tensor:
    """``-mean_s Q(s, mu(s))`` over ``(B, obs_dim)`` observations: minimising it moves the
    actor's actions uphill on the critic."""
    return -critic(obs, actor(obs)).mean()


@torch.no_grad()
def ddpg_td_errors(actor_target: DeterministicActor, critic: QCritic, critic_target: QCritic,
                   batch: NStepBatch) -> np.ndarray:
    """``(B,)`` float32 ``|target - Q(s, a)|`` of ``B`` n-step transitions: an Ape-X actor's
    priorities, equal to what :meth:`rlkit.algos.ddpg.DDPGLearner.update_prioritized` returns
    for the same weights and batch."""
    device = next(critic.parameters()).device
    _, td_errors = ddpg_critic_loss(critic, actor_target, critic_target,
                                    td_tensors(batch, None, device))
    return td_errors.abs().cpu().numpy()


class DDPGPriorityModel:
    """An Ape-X actor's copy of the four DDPG networks: it acts with ``actor`` and prioritizes
    its own n-step transitions with the others. Arguments as
    :class:`rlkit.algos.ddpg.DDPGLearner`'s (of ``config``, only ``hidden`` is read)."""

    def __init__(self, obs_dim: int, act_dim: int, action_low: np.ndarray,
                 action_high: np.ndarray, config: HiddenConfig,
                 device: str | torch.device = "cpu") -> None:
        self.actor = DeterministicActor(obs_dim, act_dim, config.hidden, action_low,
                                        action_high).to(device).requires_grad_(False)
        self.critic = QCritic(obs_dim, act_dim, config.hidden).to(device).requires_grad_(False)
        self.actor_target = copy.deepcopy(self.actor)
        self.critic_target = copy.deepcopy(self.critic)

    def load(self, weights: Weights) -> None:
        """Load :meth:`rlkit.algos.ddpg.DDPGLearner.get_priority_weights`' output."""
        load_prefixed_weights(ddpg_networks(self), weights)

    def td_errors(self, batch: NStepBatch) -> np.ndarray:
        """``(B,)`` float32 priorities: see :func:`ddpg_td_errors`."""
        return ddpg_td_errors(self.actor_target, self.critic, self.critic_target, batch)


def ddpg_networks(holder: Any) -> dict[str, nn.Module]:
    """The four networks of a learner or priority model, by the names their weights travel
    under (:func:`~rlkit.algos.prioritized_td.prefixed_weights`)."""
    return {"actor": holder.actor, "actor_target": holder.actor_target,
            "critic": holder.critic, "critic_target": holder.critic_target}
