"""Watching a trained agent: one greedy episode rendered to frames and played inline.

Frames come from gymnasium's ``render_mode="rgb_array"`` (pygame draws them off-screen, no
display needed) and play as a matplotlib animation converted to HTML with ``to_jshtml``: plain
JavaScript and PNG frames, so no ffmpeg, no network access, and the animation is saved with
the notebook when it is stored with outputs.
"""

from __future__ import annotations

import os

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import animation

from rlkit.core.types import BatchPolicy


def episode_frames(env_id: str, policy: BatchPolicy, seed: int, max_steps: int = 500,
                   every: int = 2) -> tuple[list[np.ndarray], float, int]:
    """Run one episode of ``policy`` and keep every ``every``-th frame.

    Args:
        env_id: Gymnasium id; the env is made with ``render_mode="rgb_array"``.
        policy: Batched policy ``(1, obs_dim) -> (1,)`` or ``(1, act_dim)``.
        seed: Seed of the episode's first reset.
        max_steps: Stop after this many steps even if the episode goes on.
        every: Keep one frame in ``every`` (fewer frames: a smaller, faster animation).

    Returns:
        ``(frames, episode return, steps)``; frames are ``(H, W, 3)`` uint8.
    """
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # no screen (a server, CI): SDL's default video driver would print an error on stderr
        # although off-screen frames need no display; its "dummy" driver is made for this
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = gym.make(env_id, render_mode="rgb_array")
    obs, _ = env.reset(seed=seed)
    frames, total, steps = [env.render()], 0.0, 0
    try:
        while steps < max_steps:
            action = policy(np.asarray(obs, dtype=np.float32)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total, steps = total + float(reward), steps + 1
            if steps % every == 0:
                frames.append(env.render())
            if terminated or truncated:
                break
    finally:
        env.close()
    return frames, total, steps


def animate_frames(frames: list[np.ndarray], title: str, fps: int = 25) -> str:
    """The frames as an HTML/JavaScript player (``IPython.display.HTML`` shows it)."""
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.set_axis_off()
    ax.set_title(title, fontsize=9)
    image = ax.imshow(frames[0])

    def show(i: int) -> tuple:
        image.set_data(frames[i])
        return (image,)

    anim = animation.FuncAnimation(fig, show, frames=len(frames), interval=1000 / fps,
                                   blit=True)
    html = anim.to_jshtml(default_mode="once")
    plt.close(fig)
    return html
