"""Greedy / deterministic evaluation of a policy on fresh episodes."""

from __future__ import annotations

import numpy as np

from rlkit.core.spaces import check_frames, obs_spec
from rlkit.core.types import BatchPolicy
from rlkit.envs.finite import check_env_output
from rlkit.envs.make import make_env


def evaluate_policy(policy: BatchPolicy, env_id: str, episodes: int, seed: int) -> np.ndarray:
    """Run ``episodes`` full episodes in lockstep and return their undiscounted returns.

    All episodes step together so that the policy sees one batch per time step (one forward
    pass for all of them) instead of one per episode and step.

    Args:
        policy: Maps observations ``(N, *obs_shape)`` (float32 vectors, or frames in their own
            dtype: :mod:`rlkit.core.spaces`) to actions ``(N,)`` or
            ``(N, act_dim)``, with no exploration (greedy or deterministic).
        env_id: Gymnasium id.
        episodes: Number of episodes ``N``; episode ``i`` starts from ``reset(seed=seed + i)``.
        seed: First episode's seed.

    Returns:
        ``(N,)`` float64 returns.
    """
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1.")
    envs = [make_env(env_id, seed + i) for i in range(episodes)]
    try:
        spec = obs_spec(envs[0].observation_space, env_id)
        obs = check_frames(env_id, np.stack([env.reset(seed=seed + i)[0]
                                             for i, env in enumerate(envs)]), spec)
        check_env_output(env_id, obs)
        returns, lengths = np.zeros(episodes), np.zeros(episodes, dtype=np.int64)
        rewards = np.zeros(episodes)
        running = np.ones(episodes, dtype=bool)
        while running.any():
            live = np.flatnonzero(running)
            actions = policy(obs[live])
            for j, i in enumerate(live):
                next_obs, rewards[i], terminated, truncated, _ = envs[i].step(actions[j])
                obs[i] = next_obs
                if terminated or truncated:
                    running[i] = False
            lengths[live] += 1
            check_env_output(env_id, obs, rewards, lengths)  # finished ones: checked before
            returns[live] += rewards[live]
        return returns
    finally:
        for env in envs:
            env.close()
