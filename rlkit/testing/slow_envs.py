"""A CartPole that sleeps at every step: a stand-in for a slow simulator, for the A2C/A3C demos.

Nothing in rlkit imports this module. Name the environment by :data:`SLOW_CARTPOLE`, gymnasium's
``"module:Name"`` id: ``gym.make`` imports this module first, which registers the id, so a Ray
worker builds it from the id alone. Sleeping costs wall-clock time but no CPU, so a slow worker
leaves the cores to the others, as a worker waiting on a real simulator or a remote machine would.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

#: Seconds each step of :data:`SLOW_CARTPOLE` sleeps.
SLEEP_SECONDS = 0.001


class SlowCartPole(CartPoleEnv):
    """CartPole whose ``step`` first sleeps ``sleep_seconds``."""

    def __init__(self, sleep_seconds: float = SLEEP_SECONDS,
                 render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.sleep_seconds = sleep_seconds

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        time.sleep(self.sleep_seconds)
        return super().step(action)


SLOW_CARTPOLE = f"{__name__}:rlkit/SlowCartPole-v1"


def register() -> None:
    """Register :data:`SLOW_CARTPOLE` (idempotent), with CartPole-v1's 500-step limit."""
    name = SLOW_CARTPOLE.partition(":")[2]
    if name not in gym.registry:
        gym.register(name, entry_point=SlowCartPole, max_episode_steps=500)


register()  # on import: gym.make("rlkit.testing.slow_envs:...") imports this module
