"""What DQN and DDPG share for prioritized (Ape-X) updates.

* :func:`td_tensors`: a :class:`~rlkit.core.types.Batch`, :class:`~rlkit.core.types.TensorBatch` or
  :class:`~rlkit.core.types.NStepBatch` as tensors, with the factor of the bootstrap value: the
  config's ``gamma`` for a one-step batch, the per-transition ``gamma ** k`` of an n-step one.
* :func:`importance_weights_tensor` and :func:`weighted_mean`: the importance-weighted loss
  ``mean_i(w_i * loss_i)`` of prioritized replay.
* :func:`prefixed_weights` / :func:`load_prefixed_weights`: several networks (online and target)
  in one flat :data:`~rlkit.core.types.Weights` dict, keys ``"<network>.<parameter>"``, which is
  how a learner ships what an Ape-X actor needs to compute the priorities of its own transitions.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from rlkit.core.networks import load_numpy_weights, module_weights
from rlkit.core.types import Batch, NStepBatch, TensorBatch, Weights

#: Every batch type a prioritized learner accepts.
AnyBatch = Batch | TensorBatch | NStepBatch


class TDTensors(NamedTuple):
    """A batch of ``B`` transitions as tensors on one device, ready for a TD target.

    Attributes:
        obs: ``(B, *obs_shape)``: float32 for a vector; a frame keeps its integer dtype
            (the network converts it: :mod:`rlkit.core.encoders`).
        actions: ``(B,)`` int64 (discrete) or ``(B, act_dim)`` float32, dtype as given.
        rewards: ``(B,)`` float32 (for n-step: the discounted sum of the window's rewards).
        next_obs: like ``obs``.
        terminations: ``(B,)`` float32.
        discounts: the bootstrap factor: the float ``gamma`` (one-step batch) or ``(B,)``
            float32 ``gamma ** k_i`` (n-step batch).
    """

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminations: torch.Tensor
    discounts: torch.Tensor | float


def td_tensors(batch: AnyBatch, gamma: float | None, device: torch.device) -> TDTensors:
    """``batch`` as :class:`TDTensors` on ``device``.

    Float fields become float32 (a float32 array or a tensor already on ``device`` is not
    copied); actions and integer frames keep their dtype (a uint8 frame crosses to the device
    as one byte per value). A batch with a ``discounts`` field (``NStepBatch``) uses
    it; any other batch bootstraps with the plain ``gamma``.

    Raises:
        ValueError: if the batch has no ``discounts`` and ``gamma`` is ``None``.
    """

    def tensor(values: np.ndarray | torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
        if isinstance(values, np.ndarray) and not values.flags.writeable:
            # Ray hands out arrays read-only (they live in its shared object store); torch
            # cannot share a read-only buffer, so it gets a copy (and no warning)
            values = values.copy()
        return torch.as_tensor(values, dtype=dtype, device=device)

    def floats(values: np.ndarray | torch.Tensor) -> torch.Tensor:
        return tensor(values, torch.float32)

    def observations(values: np.ndarray | torch.Tensor) -> torch.Tensor:
        floating = (values.dtype.is_floating_point if isinstance(values, torch.Tensor)
                    else values.dtype.kind == "f")  # as rlkit.core.spaces.obs_spec decides
        return tensor(values, torch.float32 if floating else None)

    discounts = getattr(batch, "discounts", None)
    if discounts is None and gamma is None:
        raise ValueError(f"a {type(batch).__name__} has no discounts and no gamma was given. "
                         "Fix: pass an NStepBatch (its discounts are gamma ** k per transition).")
    return TDTensors(observations(batch.obs), tensor(batch.actions, None),
                     floats(batch.rewards), observations(batch.next_obs),
                     floats(batch.terminations),
                     gamma if discounts is None else floats(discounts))


def importance_weights_tensor(importance_weights: np.ndarray | torch.Tensor, batch_size: int,
                              device: torch.device) -> torch.Tensor:
    """Check and convert prioritized replay's importance-sampling weights.

    Args:
        importance_weights: ``(B,)`` finite, non-negative weights ``w_i``.
        batch_size: ``B``, the batch they weight.
        device: Where the loss is computed.

    Returns:
        ``(B,)`` float32 tensor.

    Raises:
        ValueError: if the shape is not ``(B,)`` or a weight is negative or not finite.
    """
    weights = torch.as_tensor(importance_weights, dtype=torch.float32, device=device)
    if weights.shape != (batch_size,):
        raise ValueError(
            f"importance_weights has shape {tuple(weights.shape)}, the batch has {batch_size} "
            f"transitions. Fix: pass one weight per transition, shape ({batch_size},).")
    if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
        raise ValueError("importance_weights must be finite and >= 0. Fix: compute them as "
                         "(N * P(i)) ** -beta / max_j w_j from the sampling probabilities.")
    return weights


def weighted_mean(per_sample: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """``mean_i(w_i * loss_i)`` over ``(B,)`` per-sample losses; the plain mean when
    ``weights`` is ``None``."""
    return per_sample.mean() if weights is None else (weights * per_sample).mean()


def prefixed_weights(modules: dict[str, nn.Module]) -> Weights:
    """Several networks' weights in one flat dict: ``{"<name>.<parameter>": numpy array}``.

    Args:
        modules: e.g. ``{"q": online, "q_target": target}``.
    """
    return {f"{name}.{key}": value for name, module in modules.items()
            for key, value in module_weights(module).items()}


def load_prefixed_weights(modules: dict[str, nn.Module], weights: Weights) -> None:
    """Load :func:`prefixed_weights`' output into networks of the same names and shapes.

    Raises:
        KeyError: naming a network that has no weights in ``weights``.
    """
    for name, module in modules.items():
        prefix = f"{name}."
        own = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
        if not own:
            raise KeyError(f"no weights for network {name!r} (expected keys {prefix}*). Fix: "
                           f"pass the learner's get_priority_weights(), not get_weights().")
        load_numpy_weights(module, own)
