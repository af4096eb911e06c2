"""Environments that fail on purpose (CartPole variants) or declare a space an algorithm must
refuse (an unbounded Pendulum), for the fault-injection tests, the bad-input catalogue and demos.

Nothing in rlkit imports this module. The tests name the environments with gymnasium's
``"module:Name"`` ids (the constants below): ``gym.make`` imports this module first, which
registers the nine ids, so a Ray worker builds them from the id alone, like any other env:

* :data:`CRASHING` raises ``RuntimeError`` at the 600th step of each instance;
* :data:`NAN_REWARD` returns a NaN reward from its 300th step on, :data:`NAN_OBSERVATION` a
  NaN in its observation (the env runner refuses both, naming the env);
* :data:`HUGE_REWARD` returns a finite reward of 3e38 from its 300th step on, near float32's
  largest: valid data, but its squares and sums overflow, so a learner's loss or gradients
  stop being finite;
* :data:`HANGING` stops answering (sleeps for an hour) at its 300th step;
* :data:`UNBUILDABLE_IN_ACTORS` cannot be made inside a Ray actor (as an env whose ROM or
  library is missing on the workers' machines): the driver's own probe builds it, every role
  that builds it dies while starting;
* :data:`UNBOUNDED_PENDULUM` is Pendulum with an action box declared unbounded (the env clips
  the torque itself), which an algorithm that squashes its actions into the box must refuse;
* :data:`FLOAT_FRAMES` is Breakout-MinAtar returning float32 frames from its 100th step on,
  where its space declares uint8; :data:`WRONG_SHAPE_FRAMES` returns ``(4, 10, 9)`` frames from
  then on (the env runner refuses both, naming the env).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from rlkit.envs.breakout import BreakoutMinAtar


class FaultyCartPole(CartPoleEnv):
    """CartPole that crashes, returns NaN rewards or hangs after a number of steps.

    Args:
        crash_at_step: Raise ``RuntimeError`` at this step of the instance (counted over all
            its episodes).
        nan_reward_at_step: Return ``nan`` rewards from this step on.
        nan_obs_at_step: Return an observation holding ``nan`` at this step.
        huge_reward_at_step: Return rewards of ``3e38`` from this step on.
        hang_at_step: Sleep for an hour at this step (an env that stops answering).
    """

    def __init__(self, crash_at_step: int | None = None, nan_reward_at_step: int | None = None,
                 hang_at_step: int | None = None, fail_in_actors: bool = False,
                 render_mode: str | None = None, nan_obs_at_step: int | None = None,
                 huge_reward_at_step: int | None = None) -> None:
        if fail_in_actors and _in_a_ray_actor():
            raise RuntimeError("FaultyCartPole: cannot be built in this actor (injected)")
        super().__init__(render_mode=render_mode)
        self.crash_at_step = crash_at_step
        self.nan_reward_at_step = nan_reward_at_step
        self.hang_at_step = hang_at_step
        self.nan_obs_at_step = nan_obs_at_step
        self.huge_reward_at_step = huge_reward_at_step
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
        if self.huge_reward_at_step is not None and self.total_steps >= self.huge_reward_at_step:
            reward = 3e38
        if self.nan_obs_at_step is not None and self.total_steps == self.nan_obs_at_step:
            obs = obs.copy()
            obs[2] = np.nan
        return obs, reward, terminated, truncated, info


def _in_a_ray_actor() -> bool:
    try:
        import ray
    except ImportError:
        return False
    return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None


class UnboundedPendulum(PendulumEnv):
    """Pendulum whose declared action box is ``(-inf, inf)``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)


class FaultyFrames(BreakoutMinAtar):
    """Breakout-MinAtar whose frames turn float32 (``as_float``) or lose a column (else) from
    its 100th step on."""

    def __init__(self, as_float: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.as_float, self.total_steps = as_float, 0

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        frame, *rest = super().step(action)
        self.total_steps += 1
        if self.total_steps >= 100:
            frame = frame.astype(np.float32) if self.as_float else frame[:, :, :9]
        return (frame, *rest)


CRASHING = f"{__name__}:rlkit/CrashingCartPole-v1"
NAN_REWARD = f"{__name__}:rlkit/NaNRewardCartPole-v1"
NAN_OBSERVATION = f"{__name__}:rlkit/NaNObservationCartPole-v1"
HUGE_REWARD = f"{__name__}:rlkit/HugeRewardCartPole-v1"
HANGING = f"{__name__}:rlkit/HangingCartPole-v1"
UNBUILDABLE_IN_ACTORS = f"{__name__}:rlkit/UnbuildableInActorsCartPole-v1"
UNBOUNDED_PENDULUM = f"{__name__}:rlkit/UnboundedPendulum-v1"
FLOAT_FRAMES = f"{__name__}:rlkit/FloatFramesBreakout-v0"
WRONG_SHAPE_FRAMES = f"{__name__}:rlkit/WrongShapeFramesBreakout-v0"


def register() -> None:
    """Register the nine ids (idempotent)."""
    for env_id, kwargs in ((CRASHING, {"crash_at_step": 600}),
                           (NAN_REWARD, {"nan_reward_at_step": 300}),
                           (NAN_OBSERVATION, {"nan_obs_at_step": 300}),
                           (HUGE_REWARD, {"huge_reward_at_step": 300}),
                           (HANGING, {"hang_at_step": 300}),
                           (UNBUILDABLE_IN_ACTORS, {"fail_in_actors": True})):
        name = env_id.partition(":")[2]
        if name not in gym.registry:
            gym.register(name, entry_point=FaultyCartPole, kwargs=kwargs, max_episode_steps=500)
    name = UNBOUNDED_PENDULUM.partition(":")[2]
    if name not in gym.registry:
        gym.register(name, entry_point=UnboundedPendulum, max_episode_steps=200)
    for env_id, as_float in ((FLOAT_FRAMES, True), (WRONG_SHAPE_FRAMES, False)):
        name = env_id.partition(":")[2]
        if name not in gym.registry:
            gym.register(name, entry_point=FaultyFrames, kwargs={"as_float": as_float},
                         max_episode_steps=1000)


register()  # on import: gym.make("rlkit.testing.faulty_envs:...") imports this module
