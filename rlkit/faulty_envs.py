"""CartPole variants that fail on purpose, for the fault-injection tests and demos.

They are registered with gymnasium when :mod:`rlkit.envs` is imported, so a Ray worker (which
imports rlkit to build its environments) can make them by id like any other environment:

* ``rlkit/CrashingCartPole-v1`` raises ``RuntimeError`` at the 600th step of each instance;
* ``rlkit/NaNRewardCartPole-v1`` returns a NaN reward from its 300th step on;
* ``rlkit/HangingCartPole-v1`` stops answering (sleeps for an hour) at its 300th step.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class FaultyCartPole(CartPoleEnv):
    """CartPole that crashes, returns NaN rewards or hangs after a number of steps.

    Args:
        crash_at_step: Raise ``RuntimeError`` at this step of the instance (counted over all
            its episodes).
        nan_reward_at_step: Return ``nan`` rewards from this step on.
        hang_at_step: Sleep for an hour at this step (an env that stops answering).
    """

    def __init__(self, crash_at_step: int | None = None, nan_reward_at_step: int | None = None,
                 hang_at_step: int | None = None, render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.crash_at_step = crash_at_step
        self.nan_reward_at_step = nan_reward_at_step
        self.hang_at_step = hang_at_step
        self.total_steps = 0

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.total_steps += 1
        if self.crash_at_step is not None and self.total_steps == self.crash_at_step:
            raise RuntimeError(f"FaultyCartPole: injected crash at step {self.total_steps}")
        if self.hang_at_step is not None and self.total_steps == self.hang_at_step:
            time.sleep(3600)
        obs, reward, terminated, truncated, info = super().step(action)
        if self.nan_reward_at_step is not None and self.total_steps >= self.nan_reward_at_step:
            reward = float("nan")
        return obs, reward, terminated, truncated, info


def register() -> None:
    """Register the three ids (idempotent)."""
    for env_id, kwargs in (("rlkit/CrashingCartPole-v1", {"crash_at_step": 600}),
                           ("rlkit/NaNRewardCartPole-v1", {"nan_reward_at_step": 300}),
                           ("rlkit/HangingCartPole-v1", {"hang_at_step": 300})):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=FaultyCartPole, kwargs=kwargs,
                         max_episode_steps=500)
