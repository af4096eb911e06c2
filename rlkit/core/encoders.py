"""Encoders chosen by the observation: nothing for a vector, a conv net for an image.

An encoder maps a batch of observations, as they travel (uint8 frames, float32 vectors), to
float features ``(B, out_features)`` on the network's device: the one place a frame becomes
floats. The head on top (Q-values, a policy, a value) is an MLP over those features, as it is
over a vector.

* a vector ``(obs_dim,)``: :class:`Flat` (a float view; no layers), ``out_features = obs_dim``;
* a small image (each side below 36, as MinAtar's ``(4, 10, 10)``): :class:`SmallConv`, the
  network of the MinAtar paper: one 3x3 convolution of 16 channels, stride 1, ReLU;
* a large image (Atari's ``(4, 84, 84)`` stack): :class:`NatureConv`, the network of the DQN
  Nature paper: 32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1, each with a ReLU.

Images come channels first ``(C, H, W)`` or last ``(H, W, C)``: an encoder reads a shape whose
last side is smaller than its first as channels last and permutes it; a shape whose first and
last sides are equal (MinAtar Seaquest's ``(10, 10, 10)``) is refused, not guessed.
"""

from __future__ import annotations

import torch
from torch import nn

from rlkit.core.spaces import ObsSpec, as_obs_spec, image_layout

#: An image whose smaller side is at least this gets :class:`NatureConv` (the smallest input
#: its three convolutions fit: 36 -> 8 -> 3 -> 1).
LARGE_IMAGE_SIDE = 36


class Flat(nn.Module):
    """A vector as float32 features: ``(B, obs_dim)`` -> ``(B, obs_dim)``, no parameters."""

    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.out_features = obs_dim

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.float()


class _Conv(nn.Module):
    """Frames ``(B, *shape)`` (any dtype) -> ``(B, out_features)`` float features: to float,
    times ``scale``, channels first, then ``layers`` and a flatten."""

    def __init__(self, spec: ObsSpec, layers: list[nn.Module]) -> None:
        super().__init__()
        c, h, w, self.channels_last = image_layout(spec.shape)
        self.scale = spec.scale
        self.net = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            self.out_features = int(self.net(torch.zeros(1, c, h, w)).shape[1])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()
        if self.scale != 1.0:
            x = x * self.scale
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.net(x)


class SmallConv(_Conv):
    """MinAtar's encoder: ``Conv2d(C, 16, 3)`` and a ReLU; ``(4, 10, 10)`` -> 1,024 features."""

    def __init__(self, spec: ObsSpec) -> None:
        c = image_layout(spec.shape)[0]
        super().__init__(spec, [nn.Conv2d(c, 16, kernel_size=3, stride=1), nn.ReLU()])


class NatureConv(_Conv):
    """The DQN Nature paper's encoder; ``(4, 84, 84)`` -> 3,136 features."""

    def __init__(self, spec: ObsSpec) -> None:
        c = image_layout(spec.shape)[0]
        super().__init__(spec, [nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(),
                                nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                                nn.Conv2d(64, 64, 3, stride=1), nn.ReLU()])


def make_encoder(obs: int | ObsSpec) -> Flat | SmallConv | NatureConv:
    """The encoder for an observation (an int is a vector's size); its ``out_features`` is
    the size of the head's input."""
    spec = as_obs_spec(obs)
    if spec.kind == "vector":
        return Flat(spec.shape[0])
    _, h, w, _ = image_layout(spec.shape)
    if min(h, w) >= LARGE_IMAGE_SIDE:
        return NatureConv(spec)
    if min(h, w) < 3:
        raise ValueError(f"an image of shape {spec.shape} is too small for a 3x3 convolution "
                         f"(height {h}, width {w}). Fix: flatten it into a vector "
                         f"(gymnasium.wrappers.FlattenObservation).")
    return SmallConv(spec)
