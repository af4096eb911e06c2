"""Whole trajectories for on-policy and actor-learner methods (IMPALA): ``T`` consecutive steps
of ``N`` environments, time-major, with the behaviour policy's log-probabilities.

Unlike :class:`rlkit.rollout.EnvRunner` (transitions for a replay buffer), a trajectory keeps
both episode-end flags per step: V-trace must know where a trace is cut (termination *or*
truncation) and whether the step still bootstraps (truncation only, from the real final
observation, which ``next_obs`` keeps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlkit.envs import make_env, space_dims

#: A sampling policy: observations ``(N, obs_dim)`` float32 -> actions ``(N,)`` int64 and their
#: log-probabilities ``(N,)`` float32 under the policy that chose them.
SamplingPolicy = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

PER_STEP_FIELDS = ("actions", "rewards", "terminations", "truncations", "behaviour_log_probs")


@dataclass
class Trajectory:
    """``T`` steps of ``N`` environments, time-major.

    Attributes:
        obs: ``(T, N, obs_dim)`` float32, the observation each action was chosen in.
        actions: ``(T, N)`` int64.
        rewards: ``(T, N)`` float32.
        terminations: ``(T, N)`` float32, 1.0 where the episode truly ended at step ``t``.
        truncations: ``(T, N)`` float32, 1.0 where a time limit cut the episode at step ``t``.
        next_obs: ``(T, N, obs_dim)`` float32, the real observation after step ``t`` (before any
            reset), so ``next_obs[-1]`` is ``x_T`` and a truncated step can bootstrap.
        behaviour_log_probs: ``(T, N)`` float32 ``log mu(a_t|x_t)`` of the acting policy.
        policy_version: Version (learner updates) of the weights the actor acted with.
        actor: Index of the actor that collected it.
        episode_returns: Returns of the episodes that finished inside it.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    next_obs: np.ndarray
    behaviour_log_probs: np.ndarray
    policy_version: int = 0
    actor: int = 0
    episode_returns: list[float] = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        """Env steps in the trajectory, ``T * N``."""
        return int(self.rewards.size)


def check_trajectory(traj: Trajectory) -> None:
    """Raise ``ValueError`` naming the field and the fix if the arrays' lengths disagree."""
    if traj.obs.ndim != 3 or traj.obs.shape[0] < 1:
        raise ValueError(f"obs has shape {traj.obs.shape}, but a trajectory needs (T, N, obs_dim)"
                         f" with T >= 1. Fix: collect at least one step per environment.")
    t_n = traj.obs.shape[:2]
    if traj.next_obs.shape != traj.obs.shape:
        raise ValueError(f"next_obs has shape {traj.next_obs.shape} but obs has "
                         f"{traj.obs.shape}. Fix: store one next observation per step.")
    for name in PER_STEP_FIELDS:
        shape = getattr(traj, name).shape
        if shape != t_n:
            raise ValueError(f"{name} has shape {shape} but obs has {traj.obs.shape}, so {name} "
                             f"must be {t_n} (T steps x N envs). Fix: give every per-step "
                             f"field the same T and N.")


class TrajectoryRunner:
    """Owns ``N`` environments, steps them in lockstep, and cuts the stream into trajectories.

    Episodes continue across calls; a finished episode's env is reset at once, and the reset
    observation becomes the next row's ``obs`` (never a ``next_obs``).

    Args:
        env_id: Gymnasium id (built here, in the process that steps it; discrete actions).
        seed: Env ``j`` is seeded with ``seed + j``.
        num_envs: ``N``.
        algorithm: Name used in the error if the env does not fit.
    """

    def __init__(self, env_id: str, seed: int, num_envs: int, algorithm: str = "IMPALA") -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} must be an int >= 1. Fix: use e.g. 8.")
        self.envs = [make_env(env_id, seed + j, "discrete", algorithm) for j in range(num_envs)]
        self.obs_dim, self.n_actions = space_dims(self.envs[0])
        self.obs = np.stack([env.reset(seed=seed + j)[0] for j, env in enumerate(self.envs)]
                            ).astype(np.float32)
        self.episode_return = np.zeros(num_envs)

    def run(self, steps: int, policy: SamplingPolicy) -> Trajectory:
        """Take ``T = steps`` steps in each env with ``policy``; returns a :class:`Trajectory`."""
        n = len(self.envs)
        obs = np.empty((steps, n, self.obs_dim), np.float32)
        next_obs = np.empty_like(obs)
        actions = np.empty((steps, n), np.int64)
        logp = np.empty((steps, n), np.float32)
        rewards, terms, truncs = (np.zeros((steps, n), np.float32) for _ in range(3))
        finished: list[float] = []
        for t in range(steps):
            obs[t] = self.obs
            actions[t], logp[t] = policy(self.obs)
            for j, env in enumerate(self.envs):
                o, r, terminated, truncated, _ = env.step(int(actions[t, j]))
                rewards[t, j], next_obs[t, j] = r, o
                terms[t, j], truncs[t, j] = terminated, truncated and not terminated
                self.episode_return[j] += r
                if terminated or truncated:
                    finished.append(float(self.episode_return[j]))
                    self.episode_return[j] = 0.0
                    o, _ = env.reset()
                self.obs[j] = o
        return Trajectory(obs, actions, rewards, terms, truncs, next_obs, logp,
                          episode_returns=finished)

    def close(self) -> None:
        for env in self.envs:
            env.close()
