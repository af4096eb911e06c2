"""Stepping an environment with a policy and collecting transitions in fragments.

One source of truth for the step loop, used by the single-process trainers and by the Ray
rollout workers: it stores time-limit truncations as non-terminal, ends the episode on either
flag, and reports finished episodes' returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlkit.envs import make_env, space_dims
from rlkit.types import ActionKind, Batch, BatchPolicy


@dataclass
class Fragment:
    """Consecutive transitions from the runner's environments.

    Attributes:
        batch: ``T * N`` transitions, time-major: rows ``t*N .. t*N + N-1`` are step ``t`` of
            envs ``0 .. N-1``.
        episode_returns: Returns of the episodes that finished inside this fragment.
        episode_lengths: Their lengths in steps.
        ends: ``(T * N,)`` bool, True where the episode ended (terminated or truncated) at
            this step: the next row of that env starts a new episode. N-step returns need it,
            since ``batch.terminations`` marks only true terminations.
    """

    batch: Batch
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)


class EnvRunner:
    """Owns ``num_envs`` environments and steps them in lockstep, across calls.

    Stepping several environments together lets the policy choose all their actions with one
    forward pass, which is what makes a rollout worker fast: the per-call cost of a small
    network is paid once per ``num_envs`` env steps.

    Args:
        env_id: Gymnasium id; the envs are built here, in the process that steps them.
        seed: Env ``j`` is seeded with ``seed + j`` (its first reset and its action space).
        action_kind: ``"discrete"`` or ``"continuous"``, checked against the env.
        algorithm: Name used in the error if the action space does not fit.
        num_envs: ``N``, the number of environments stepped together.
    """

    def __init__(self, env_id: str, seed: int, action_kind: ActionKind,
                 algorithm: str = "this algorithm", num_envs: int = 1) -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} must be an int >= 1.")
        self.envs = [make_env(env_id, seed + j, action_kind, algorithm) for j in range(num_envs)]
        self.num_envs = num_envs
        self.obs_dim, self.action_dim = space_dims(self.envs[0])
        self.discrete = action_kind == "discrete"
        self.obs = np.stack([env.reset(seed=int(seed + j))[0]
                             for j, env in enumerate(self.envs)]).astype(np.float32)
        self.episode_return = np.zeros(num_envs)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)

    def run(self, steps_per_env: int, policy: BatchPolicy) -> Fragment:
        """Take ``T = steps_per_env`` steps in each of the ``N`` envs.

        Args:
            steps_per_env: ``T``; episodes continue across calls.
            policy: Maps observations ``(N, obs_dim)`` float32 to actions ``(N,)`` (discrete)
                or ``(N, act_dim)`` (continuous).

        Returns:
            A :class:`Fragment` of ``T * N`` transitions: ``obs``/``next_obs``
            ``(T*N, obs_dim)``, ``actions`` ``(T*N,)`` or ``(T*N, act_dim)``,
            ``rewards``/``terminations`` ``(T*N,)``.
        """
        n, size = self.num_envs, steps_per_env * self.num_envs
        obs_buf = np.empty((size, self.obs_dim), dtype=np.float32)
        next_buf = np.empty((size, self.obs_dim), dtype=np.float32)
        act_shape = (size,) if self.discrete else (size, self.action_dim)
        act_buf = np.empty(act_shape, dtype=np.int64 if self.discrete else np.float32)
        rew_buf = np.empty((size,), dtype=np.float32)
        term_buf = np.empty((size,), dtype=np.float32)
        ends = np.zeros((size,), dtype=bool)
        fragment = Fragment(Batch(obs_buf, act_buf, rew_buf, next_buf, term_buf), ends)
        for t in range(steps_per_env):
            actions = policy(self.obs)
            rows = slice(t * n, (t + 1) * n)
            obs_buf[rows] = self.obs
            act_buf[rows] = actions
            for j, env in enumerate(self.envs):
                next_obs, reward, terminated, truncated, _ = env.step(actions[j])
                row = t * n + j
                rew_buf[row] = reward
                next_buf[row] = next_obs  # the true next state, even when the episode was cut
                term_buf[row] = float(terminated)  # truncation is NOT termination: it bootstraps
                self.episode_return[j] += float(reward)
                self.episode_length[j] += 1
                if terminated or truncated:
                    ends[row] = True
                    fragment.episode_returns.append(float(self.episode_return[j]))
                    fragment.episode_lengths.append(int(self.episode_length[j]))
                    self.episode_return[j], self.episode_length[j] = 0.0, 0
                    next_obs, _ = env.reset()
                self.obs[j] = next_obs
        return fragment

    def close(self) -> None:
        for env in self.envs:
            env.close()
