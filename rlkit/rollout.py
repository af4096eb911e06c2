"""Stepping an environment with a policy and collecting transitions in fragments.

One source of truth for the step loop, used by the single-process trainers and by the Ray
rollout workers: it stores time-limit truncations as non-terminal, ends the episode on either
flag, and reports finished episodes' returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlkit.buffers import Batch
from rlkit.envs import ActionKind, make_env, space_dims

Policy = Callable[[np.ndarray], "int | np.ndarray"]


@dataclass
class Fragment:
    """A run of consecutive transitions from one environment.

    Attributes:
        batch: The ``T`` transitions.
        episode_returns: Returns of the episodes that finished inside this fragment.
        episode_lengths: Their lengths in steps.
    """

    batch: Batch
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)


class EnvRunner:
    """Owns one environment and steps it, episode after episode, across calls.

    Args:
        env_id: Gymnasium id; the env is built here, in the process that steps it.
        seed: Seeds the environment's first reset and its action space.
        action_kind: ``"discrete"`` or ``"continuous"``, checked against the env.
        algorithm: Name used in the error if the action space does not fit.
    """

    def __init__(self, env_id: str, seed: int, action_kind: ActionKind,
                 algorithm: str = "this algorithm") -> None:
        self.env = make_env(env_id, seed, action_kind, algorithm)
        self.obs_dim, self.action_dim = space_dims(self.env)
        self.discrete = action_kind == "discrete"
        self.obs, _ = self.env.reset(seed=int(seed))
        self.episode_return = 0.0
        self.episode_length = 0

    def run(self, num_steps: int, policy: Policy) -> Fragment:
        """Take ``num_steps`` steps, calling ``policy(obs)`` for each action.

        Args:
            num_steps: Steps ``T`` to take; episodes continue across calls.
            policy: Maps one observation ``(obs_dim,)`` to an action (an int, or a
                ``(act_dim,)`` array).

        Returns:
            A :class:`Fragment` with ``obs`` ``(T, obs_dim)``, ``actions`` ``(T,)`` or
            ``(T, act_dim)``, ``rewards``/``terminations`` ``(T,)``, ``next_obs``
            ``(T, obs_dim)``.
        """
        obs_buf = np.empty((num_steps, self.obs_dim), dtype=np.float32)
        next_buf = np.empty((num_steps, self.obs_dim), dtype=np.float32)
        if self.discrete:
            act_buf = np.empty((num_steps,), dtype=np.int64)
        else:
            act_buf = np.empty((num_steps, self.action_dim), dtype=np.float32)
        rew_buf = np.empty((num_steps,), dtype=np.float32)
        term_buf = np.empty((num_steps,), dtype=np.float32)
        fragment = Fragment(Batch(obs_buf, act_buf, rew_buf, next_buf, term_buf))
        for t in range(num_steps):
            action = policy(self.obs)
            next_obs, reward, terminated, truncated, _ = self.env.step(action)
            obs_buf[t] = self.obs
            act_buf[t] = action
            rew_buf[t] = reward
            next_buf[t] = next_obs  # the true next state, even when the episode was cut short
            term_buf[t] = float(terminated)  # truncation is NOT termination: it bootstraps
            self.episode_return += float(reward)
            self.episode_length += 1
            if terminated or truncated:
                fragment.episode_returns.append(self.episode_return)
                fragment.episode_lengths.append(self.episode_length)
                self.episode_return, self.episode_length = 0.0, 0
                self.obs, _ = self.env.reset()
            else:
                self.obs = next_obs
        return fragment

    def close(self) -> None:
        self.env.close()
