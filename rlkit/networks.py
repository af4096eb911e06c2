"""Small neural networks: an MLP builder and the DQN Q-network."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def mlp(in_dim: int, out_dim: int, hidden: Sequence[int], activation: type[nn.Module] = nn.ReLU
        ) -> nn.Sequential:
    """A fully connected network ``in_dim -> hidden... -> out_dim`` with no output activation.

    Args:
        in_dim: Input features.
        out_dim: Output features.
        hidden: Width of each hidden layer, e.g. ``(128, 128)``.
        activation: Activation class placed after every hidden layer.

    Returns:
        A module mapping ``(B, in_dim)`` to ``(B, out_dim)``.
    """
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), activation()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class QNetwork(nn.Module):
    """Maps an observation to one Q-value per discrete action.

    Args:
        obs_dim: Size of the flat observation.
        n_actions: Number of discrete actions.
        hidden: Hidden layer widths.
    """

    def __init__(self, obs_dim: int, n_actions: int, hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.n_actions = n_actions
        self.net = mlp(obs_dim, n_actions, hidden)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim)`` float32 -> ``(B, n_actions)`` Q-values."""
        return self.net(obs)

    @torch.no_grad()
    def greedy_actions(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim)`` -> ``(B,)`` int64 index of the largest Q-value."""
        return self.forward(obs).argmax(dim=1)


def load_numpy_weights(module: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Load a ``{name: numpy array}`` state dict (the form weights travel in between processes).

    Arrays fetched from Ray's object store are read-only views; ``torch.tensor`` copies them
    (a few hundred KB here) so torch never holds a tensor on memory it may not write.
    """
    module.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
