"""Watching a trained agent: one greedy episode rendered to frames and played inline.

Frames come from gymnasium's ``render_mode="rgb_array"`` (pygame draws them off-screen, no
display needed) and play as a matplotlib animation converted to HTML with ``to_jshtml``: plain
JavaScript and PNG frames, so no ffmpeg, no network access, and the animation is saved with
the notebook when it is stored with outputs. The player's buttons are plain Unicode symbols:
matplotlib draws them with Font Awesome icons fetched from a CDN, which a learner offline
never sees.
"""

from __future__ import annotations

import os
import re

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
from matplotlib import animation

from rlkit.core.spaces import obs_spec
from rlkit.core.types import BatchPolicy
from rlkit.core.validation import COUNT, check_value
from rlkit.envs.make import check_env_id

#: matplotlib's player buttons (Font Awesome icon names) as Unicode symbols.
BUTTON_SYMBOLS = {"fa fa-minus": "\u2212", "fa fa-fast-backward": "\u23ee",
                  "fa fa-step-backward": "\u25c2", "fa fa-play fa-flip-horizontal": "\u25c0",
                  "fa fa-pause": "\u23f8", "fa fa-play": "\u25b6",
                  "fa fa-step-forward": "\u25b8", "fa fa-fast-forward": "\u23ed",
                  "fa fa-plus": "+"}


def episode_frames(env_id: str, policy: BatchPolicy, seed: int, max_steps: int = 500,
                   every: int = 2) -> tuple[list[np.ndarray], float, int]:
    """Run one episode of ``policy`` and keep every ``every``-th frame.

    Args:
        env_id: Gymnasium id; the env is made with ``render_mode="rgb_array"``.
        policy: Batched policy ``(1, *obs_shape) -> (1,)`` or ``(1, act_dim)``.
        seed: Seed of the episode's first reset.
        max_steps: Stop after this many steps even if the episode goes on.
        every: Keep one frame in ``every`` (fewer frames: a smaller, faster animation).

    Returns:
        ``(frames, episode return, steps)``; frames are ``(H, W, 3)`` uint8.
    """
    check_value("every", every, COUNT)
    check_value("max_steps", max_steps, COUNT)
    check_env_id(env_id)
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        # no screen (a server, CI): SDL's default video driver would print an error on stderr
        # although off-screen frames need no display; its "dummy" driver is made for this
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = gym.make(env_id, render_mode="rgb_array")
    dtype = obs_spec(env.observation_space, env_id).dtype  # as evaluation sees it (a frame: uint8)
    obs, _ = env.reset(seed=seed)
    frames, total, steps = [env.render()], 0.0, 0
    try:
        while steps < max_steps:
            action = policy(np.asarray(obs, dtype=dtype)[None])[0]
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
    return _offline_buttons(html)


def _offline_buttons(html: str) -> str:
    """``html`` without the icon font's CDN link, each icon replaced by its Unicode symbol."""
    html = re.sub(r'<link rel="stylesheet"\s+href="https?://[^"]*font-awesome[^"]*">', "", html)
    return re.sub(r'<i class="([^"]+)"></i>',
                  lambda icon: BUTTON_SYMBOLS.get(icon.group(1), icon.group(0)), html)
