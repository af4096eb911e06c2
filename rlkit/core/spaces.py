"""What an observation is: a vector or an image, its shape, the dtype it travels in.

A vector observation (CartPole's 4 floats) travels as float32. An image (Breakout-MinAtar's
``(4, 10, 10)`` frame, an Atari stack of ``(4, 84, 84)``) travels as the env returns it, uint8
or bool, through the runner, fragments, replay and the object store: a float32 copy would take
4x the bytes in every buffer and message. The network converts it to floats on the learner's
device (:mod:`rlkit.core.encoders`), scaled by :attr:`ObsSpec.scale`. The env runner, replay and
the networks all read the form from here.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import gymnasium as gym
import numpy as np

ObsKind = Literal["vector", "image"]


class ObsSpec(NamedTuple):
    """One observation's form.

    Attributes:
        shape: ``(obs_dim,)`` for a vector; ``(C, H, W)`` or ``(H, W, C)`` for an image.
        dtype: What it is stored and shipped as: float32 for a float space, else the space's
            own dtype (uint8, bool, an int).
        scale: What the network multiplies it by after converting to float: ``1 / high`` for
            an integer image whose values reach above 1 (Atari's 0-255), else 1.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    scale: float = 1.0

    @property
    def kind(self) -> ObsKind:
        return "vector" if len(self.shape) == 1 else "image"

    @property
    def nbytes(self) -> int:
        """Bytes of one observation as stored."""
        return int(np.prod(self.shape)) * self.dtype.itemsize


def as_obs_spec(obs: int | ObsSpec) -> ObsSpec:
    """``obs`` as an :class:`ObsSpec`: an int is a float32 vector's size (what every MLP-only
    caller passed before images)."""
    return obs if isinstance(obs, ObsSpec) else ObsSpec((int(obs),), np.dtype(np.float32))


def image_layout(shape: tuple[int, ...], env_id: str = "the env"
                 ) -> tuple[int, int, int, bool]:
    """``(channels, height, width, channels_last)`` of an image ``shape``: the smaller of its
    first and last sides holds the channels. Equal ones cannot be told apart: a ``ValueError``
    naming ``env_id`` and the fix (MinAtar Seaquest's ``(10, 10, 10)`` would otherwise be read
    channels first without a word)."""
    if shape[0] == shape[-1]:
        raise ValueError(
            f"{env_id} returns images of shape {tuple(shape)}: its first and last sides are equal, "
            f"so which one holds the channels cannot be told from the shape (rlkit reads the "
            f"smaller of the two as the channels). Fix: make the env return frames channels "
            f"first, (C, H, W) with C != W, e.g. with gymnasium.wrappers.TransformObservation "
            f"and a transpose (2, 0, 1) for channels-last frames.")
    channels_last = shape[-1] < shape[0]
    c, h, w = (shape[2], shape[0], shape[1]) if channels_last else shape
    return int(c), int(h), int(w), channels_last


def obs_spec(space: gym.Space, env_id: str = "the env", algorithm: str = "this algorithm",
             images: bool = True) -> ObsSpec:
    """The :class:`ObsSpec` of an observation ``space``, or a ``ValueError`` naming ``env_id``
    and the fix if ``algorithm`` cannot take it: a Box of 1 dimension (a vector) or 3 (an
    image, when ``images``)."""
    shape = getattr(space, "shape", None)
    if not isinstance(space, gym.spaces.Box) or shape is None or len(shape) not in (1, 3):
        raise ValueError(
            f"{algorithm} takes a Box observation of 1 dimension (a vector) or 3 (an image, "
            f"channels first or last), but {env_id} has {space}. Fix: pick such an env, or add "
            f"a wrapper that flattens the observation (gymnasium.wrappers.FlattenObservation).")
    if len(shape) == 3 and not images:
        raise ValueError(
            f"{algorithm} here acts on vector observations only (its networks are MLPs), but "
            f"{env_id} returns images of shape {shape} ({space.dtype}). Fix: use an algorithm "
            f"that takes images (DQN, Ape-X DQN, IMPALA, PPO, APPO), or extend this one with "
            f"an encoder (rlkit.core.networks.encoded_mlp).")
    if len(shape) == 3:
        image_layout(shape, env_id)  # (refuses a shape whose channels cannot be told)
    dtype = np.dtype(space.dtype)
    if dtype.kind == "f":
        return ObsSpec(tuple(shape), np.dtype(np.float32))
    high = float(np.max(space.high)) if dtype.kind in "iu" else 1.0
    return ObsSpec(tuple(shape), dtype, 1.0 / high if high > 1 else 1.0)


def check_frames(env_id: str, observations: np.ndarray, spec: ObsSpec) -> np.ndarray:
    """``observations`` ``(N, *spec.shape)`` in ``spec.dtype``, or a ``ValueError`` naming
    ``env_id`` if the env returned another shape, or a float where its space declares an
    integer image (a float copy would silently cost 4x the bytes, or truncate)."""
    values = np.asarray(observations)
    if values.shape[1:] != spec.shape:
        raise ValueError(
            f"{env_id} returned observations of shape {values.shape[1:]}, but its "
            f"observation_space says {spec.shape}. Fix: make the env return what its space "
            f"declares (or declare what it returns).")
    if values.dtype == spec.dtype:
        return values
    if spec.dtype.kind != "f" and values.dtype.kind == "f":
        raise ValueError(
            f"{env_id} returned {values.dtype} observations, but its observation_space "
            f"declares {spec.dtype} images. Fix: return {spec.dtype} frames, or declare a "
            f"float Box.")
    return values.astype(spec.dtype)
