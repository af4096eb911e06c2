"""Solutions to notebook 09's coding exercises."""

import numpy as np


def conv_features(shape, layers):
    """Flattened features of ``(C, H, W)`` frames after ``(out_channels, kernel, stride)`` convs."""
    channels, height, width = shape
    for out_channels, kernel, stride in layers:
        channels = out_channels
        height = (height - kernel) // stride + 1
        width = (width - kernel) // stride + 1
    return channels * height * width


def frame_bytes(obs_shape, dtype, unroll_length, num_envs):
    """Bytes of a fragment's ``obs`` and ``next_obs``: ``(T, N, *obs_shape)`` each."""
    return 2 * unroll_length * num_envs * int(np.prod(obs_shape)) * np.dtype(dtype).itemsize
