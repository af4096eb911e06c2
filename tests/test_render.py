"""Rendering a greedy episode: the frames belong to the episode evaluation would score."""

import numpy as np

from rlkit.envs.evaluation import evaluate_policy
from rlkit.notebook.render import animate_frames, episode_frames


def lean_policy(obs: np.ndarray) -> np.ndarray:
    """Push the cart towards the side the pole leans to: ``(N, 4) -> (N,)``."""
    return (obs[:, 2] > 0).astype(np.int64)


def test_frames_follow_the_episode_evaluation_scores():
    frames, total, steps = episode_frames("CartPole-v1", lean_policy, seed=3, every=5)
    assert total == evaluate_policy(lean_policy, "CartPole-v1", 1, 3)[0] == steps
    assert len(frames) == steps // 5 + 1
    assert frames[0].dtype == np.uint8 and frames[0].ndim == 3 and frames[0].shape[2] == 3
    html = animate_frames(frames[:3], "three frames")
    assert html.count("data:image/png;base64") == 3  # one embedded PNG per frame, no ffmpeg
    # nothing fetched from the network: the buttons are Unicode symbols, not a CDN's icon font
    assert "http" not in html and 'class="fa' not in html, html
    assert all(symbol in html for symbol in ("\u25b6", "\u23f8", "\u23ee", "\u23ed"))


def test_max_steps_stops_a_long_episode():
    frames, total, steps = episode_frames("Pendulum-v1", lambda o: np.zeros((1, 1), np.float32),
                                          seed=0, max_steps=10, every=1)
    assert steps == 10 and len(frames) == 11 and total < 0
