"""Breakout-MinAtar as a gymnasium environment: MinAtar's Breakout rules (Young & Tian 2019,
"MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible Reinforcement Learning
Experiments") written here in NumPy, so rlkit depends on no GPL code (the ``minatar`` package is
GPL-3.0; the tests compare this one with it when it is installed, see the README).

The game, on a 10 x 10 grid: a paddle on the bottom row, a ball that moves one cell along a
diagonal per step, three rows of bricks (rows 1-3). A brick the ball reaches breaks (+1) and
sends the ball back; when every brick is gone and the ball comes down to the paddle's row, three
new rows appear. A paddle under the ball bounces it up, still moving the same way sideways; a
paddle where the ball would land (hit on its side) sends it back up the way it came; the ball on
the bottom row anywhere else ends the episode. Walls and the ceiling reflect it. A step of the
paddle: one cell left or right.

As MinAtar: 6 actions (no-op, left, up, right, down, fire; only no-op, left and right move the
paddle), sticky actions (with probability ``sticky_action_prob`` = 0.1 the previous action is
repeated), one random stream for the sticky draws and the ball's start (``reset(seed=s)`` seeds
it as MinAtar's ``seed(s)`` does, so a seed and an action sequence give MinAtar's frames).
Breakout has no difficulty ramp in MinAtar. Added here: a time limit of
:data:`MAX_EPISODE_STEPS` steps (registered with the id), so a perfect player's episode ends.

Observation: ``(4, 10, 10)`` uint8 in {0, 1}, channels first (paddle, ball, trail: where the
ball was one step before, bricks); MinAtar's own state is the same grid channels last, as floats.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

#: The id every worker builds it by (registered when :mod:`rlkit.envs` is imported).
ENV_ID = "rlkit/BreakoutMinAtar-v0"
#: The time limit: a perfect player never loses the ball (MinAtar has none).
MAX_EPISODE_STEPS = 10_000
PADDLE, BALL, TRAIL, BRICK = range(4)
NOOP, LEFT, UP, RIGHT, DOWN, FIRE = range(6)
#: The ball's four diagonal directions as (dx, dy), in MinAtar's numbering: up-left,
#: up-right, down-right, down-left.
DIRECTIONS = ((-1, -1), (1, -1), (1, 1), (-1, 1))
FLIP_X = (1, 0, 3, 2)  # off a side wall
FLIP_Y = (3, 2, 1, 0)  # off the ceiling, a brick, or the paddle under the ball
SIDEWAYS = (2, 3, 0, 1)  # off the paddle the ball lands on from the side


class BreakoutMinAtar(gym.Env):
    """MinAtar's Breakout (see the module's docstring for the rules and the shapes)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, sticky_action_prob: float = 0.1, render_mode: str | None = None) -> None:
        if not 0.0 <= sticky_action_prob <= 1.0:
            raise ValueError(f"sticky_action_prob={sticky_action_prob!r} must be in [0, 1]. "
                             f"Fix: use MinAtar's 0.1, or 0.0 for none.")
        self.sticky_action_prob = sticky_action_prob
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 1, (4, 10, 10), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.random = np.random.RandomState()
        self.last_action = NOOP
        self.bricks = np.zeros((10, 10), dtype=np.uint8)
        self.ball_x = self.ball_y = self.last_x = self.last_y = self.direction = self.paddle = 0
        self.striking = self.over = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:  # MinAtar's seed(): one stream for the sticky draws and the starts
            self.random = np.random.RandomState(seed)
            self.last_action = NOOP
        self.ball_y, self.paddle = 3, 4
        self.ball_x, self.direction = ((0, 2), (9, 3))[self.random.randint(2)]
        self.last_x, self.last_y = self.ball_x, self.ball_y
        self.bricks[:] = 0
        self.bricks[1:4, :] = 1
        self.striking = self.over = False
        return self.frame(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.over:
            raise RuntimeError("step() after the episode ended. Fix: call reset() first.")
        if not self.action_space.contains(action):
            raise ValueError(f"action={action!r} is not one of Breakout's 6 actions (0-5).")
        if self.random.rand() < self.sticky_action_prob:
            action = self.last_action
        self.last_action = int(action)
        if action == LEFT:
            self.paddle = max(0, self.paddle - 1)
        elif action == RIGHT:
            self.paddle = min(9, self.paddle + 1)
        reward = float(self._move_ball())
        return self.frame(), reward, self.over, False, {}

    def _move_ball(self) -> int:
        """One step of the ball; returns the reward (a broken brick)."""
        self.last_x, self.last_y = self.ball_x, self.ball_y
        dx, dy = DIRECTIONS[self.direction]
        x, y, reward, struck = self.ball_x + dx, self.ball_y + dy, 0, False
        if not 0 <= x <= 9:
            x = min(max(x, 0), 9)
            self.direction = FLIP_X[self.direction]
        if y < 0:
            y = 0
            self.direction = FLIP_Y[self.direction]
        elif self.bricks[y, x]:
            struck = True
            if not self.striking:  # one brick per contact: the ball turns back
                reward = 1
                self.bricks[y, x] = 0
                y = self.last_y
                self.direction = FLIP_Y[self.direction]
        elif y == 9:
            if not self.bricks.any():
                self.bricks[1:4, :] = 1
            if self.ball_x == self.paddle:
                self.direction, y = FLIP_Y[self.direction], self.last_y
            elif x == self.paddle:
                self.direction, y = SIDEWAYS[self.direction], self.last_y
            else:
                self.over = True
        self.striking = struck
        self.ball_x, self.ball_y = x, y
        return reward

    def frame(self) -> np.ndarray:
        """The observation: ``(4, 10, 10)`` uint8 in {0, 1}."""
        frame = np.zeros((4, 10, 10), dtype=np.uint8)
        frame[PADDLE, 9, self.paddle] = 1
        frame[BALL, self.ball_y, self.ball_x] = 1
        frame[TRAIL, self.last_y, self.last_x] = 1
        frame[BRICK] = self.bricks
        return frame

    def render(self) -> np.ndarray | None:
        """``(160, 160, 3)`` uint8: each cell 16 x 16 pixels, one colour per channel."""
        if self.render_mode != "rgb_array":
            return None
        colours = np.array([[0, 0, 0], [80, 160, 255], [255, 255, 255], [120, 120, 120],
                            [230, 90, 60]], dtype=np.uint8)  # empty, paddle, ball, trail, brick
        frame = self.frame()
        layer = np.zeros((10, 10), dtype=np.int64)
        for channel in (BRICK, TRAIL, PADDLE, BALL):  # the ball drawn last, on top
            layer[frame[channel] == 1] = channel + 1
        return np.kron(colours[layer], np.ones((16, 16, 1), dtype=np.uint8))


def register() -> None:
    """Register :data:`ENV_ID` once (``rlkit.envs`` does it on import)."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=BreakoutMinAtar, max_episode_steps=MAX_EPISODE_STEPS)
