"""Refuse an environment's NaN or infinite output where it comes out, naming the environment;
and its frames, where they differ from its declared observation space (:class:`CheckedFrames`).

A NaN reward or observation that reaches a learner surfaces much later as a non-finite loss,
where nothing says it came from the environment (the learners would blame their learning rate).
:class:`~rlkit.envs.runner.EnvRunner` and :func:`~rlkit.envs.evaluation.evaluate_policy` check
every step they take here instead.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlkit.core.spaces import check_frames, obs_spec


class NonFiniteEnvOutput(FloatingPointError):
    """An environment returned a NaN or infinite reward or observation.

    A ``FloatingPointError``, as a learner's non-finite loss is: a Ray driver stops on it with
    the role that stepped the env named, instead of restarting a worker that would meet the
    same value again."""


def check_env_output(env_id: str, observations: np.ndarray, rewards: np.ndarray | None = None,
                     episode_steps: np.ndarray | None = None) -> None:
    """Raise :class:`NonFiniteEnvOutput` if ``observations`` (``(N, ...)``) or ``rewards``
    (``(N,)``) holds a NaN or an infinity, naming ``env_id``, the env copy, the step and the fix.

    ``episode_steps``: ``(N,)``, the step of its episode each copy just took, 0 for a reset
    (``None``: every copy was reset)."""
    if _all_finite(observations) and (rewards is None or _all_finite(rewards)):
        return  # the common case: one pass over each array
    for what, values in (("observation", observations), ("reward", rewards)):
        if values is None or np.asarray(values).dtype.kind != "f":
            continue
        flat = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        bad = ~np.isfinite(flat)
        if bad.any():
            copy = int(np.flatnonzero(bad.any(axis=1))[0])
            step = 0 if episode_steps is None else int(episode_steps[copy])
            when = f"step {step} of its episode" if step else "at reset"
            raise NonFiniteEnvOutput(
                f"{env_id} returned {flat[copy][bad[copy]][0]} in its {what} (env copy {copy}, "
                f"{when}): no learner can train on it. Fix: correct the environment, or wrap "
                f"it to replace or clip such values (gymnasium.wrappers.TransformReward / "
                f"TransformObservation) and register the wrapped env under its own id.")


def _all_finite(values: np.ndarray) -> bool:
    """Whether a NumPy array holds no NaN or infinity (ints always do)."""
    return values.dtype.kind != "f" or bool(np.isfinite(values).all())


class CheckedFrames(gym.ObservationWrapper):
    """An image env's observations checked against its space as each copy returns them.

    A ``SyncVectorEnv`` stacks its copies' frames into an array of the declared shape and
    dtype; a frame that differs fails there with numpy's own message ("Output array is the wrong
    shape", "Cannot cast ..."), which names no env. Checked first, it raises
    :func:`~rlkit.core.spaces.check_frames`' error naming ``env_id`` and the fix."""

    def __init__(self, env: gym.Env, env_id: str) -> None:
        super().__init__(env)
        self.env_id, self.spec_of_frames = env_id, obs_spec(env.observation_space, env_id)

    def observation(self, observation: Any) -> Any:
        check_frames(self.env_id, np.asarray(observation)[np.newaxis], self.spec_of_frames)
        return observation
