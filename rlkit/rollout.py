"""Stepping environments with a policy and collecting transitions in fragments.

One source of truth for the off-policy step loop, used by the single-process trainers and by
the Ray rollout workers: it stores time-limit truncations as non-terminal, ends the episode on
either flag, and reports finished episodes' returns.

The environments are one gymnasium vector env: the environment's own vectorised implementation
when it has one (``gym.make_vec(..., vectorization_mode="vector_entry_point")``: CartPole steps
all its copies in a few numpy operations), else a ``SyncVectorEnv`` of single envs. Gymnasium
1.x vector envs reset a finished copy **on the next step** (``AutoresetMode.NEXT_STEP``): the
step that ends an episode returns its real final observation, and the following ``step`` call
ignores that copy's action and returns the new episode's first observation with reward 0. That
reset step is not a transition, so the runner does not store it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from rlkit.envs import make_env, space_dims
from rlkit.types import ActionKind, Batch, BatchPolicy


@dataclass
class Fragment:
    """Consecutive transitions from the runner's environments.

    Attributes:
        batch: ``M`` transitions in the order they were taken: each vector step adds one row
            per env that took a real step (reset steps are left out), in env order.
        env_ids: ``(M,)`` int64, the env each row came from; the rows of one env are its
            consecutive steps (n-step returns group by it).
        ends: ``(M,)`` bool, True where the episode ended (terminated or truncated) at this
            step: that env's next row starts a new episode. N-step returns need it, since
            ``batch.terminations`` marks only true terminations.
        episode_returns: Returns of the episodes that finished inside this fragment.
        episode_lengths: Their lengths in steps.
    """

    batch: Batch
    env_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)


def make_vector_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` as one vector env with next-step autoreset: the
    environment's native vector implementation if it registers one, else ``SyncVectorEnv``."""
    name = env_id.partition(":")[2] if ":" in env_id else env_id  # make_env imported the module
    native = gym.spec(name).vector_entry_point is not None
    vec = gym.make_vec(name, num_envs,
                       vectorization_mode="vector_entry_point" if native else "sync")
    mode = vec.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:  # pragma: no cover - gymnasium's default
        vec.close()
        raise ValueError(f"{env_id}'s vector env resets with {mode}; EnvRunner handles "
                         "gymnasium's default NEXT_STEP autoreset only. Fix: register the "
                         "environment with autoreset_mode=AutoresetMode.NEXT_STEP.")
    return vec


def idle_actions(space: gym.Space, num_envs: int) -> np.ndarray:
    """``num_envs`` valid actions to pass when every copy is resetting (the env ignores them):
    action 0, or the point of the box nearest the origin. Drawing no random number keeps the
    exploration streams unchanged."""
    if isinstance(space, gym.spaces.Discrete):
        return np.full(num_envs, space.start, dtype=np.int64)
    return np.tile(np.clip(0.0, space.low, space.high).astype(np.float32), (num_envs, 1))


class EnvRunner:
    """Owns ``num_envs`` environments (one vector env) and steps them in lockstep, across calls.

    Stepping several environments together lets the policy choose all their actions with one
    forward pass, which is what makes a rollout worker fast: the per-call cost of a small
    network is paid once per ``num_envs`` env steps.

    Args:
        env_id: Gymnasium id; the envs are built here, in the process that steps them.
        seed: Seeds the vector env's first reset (a ``SyncVectorEnv`` seeds copy ``j`` with
            ``seed + j``; a native one draws every copy from one generator seeded with it).
        action_kind: ``"discrete"`` or ``"continuous"``, checked against the env.
        algorithm: Name used in the error if the action space does not fit.
        num_envs: ``N``, the number of environments stepped together.

    Attributes:
        env: A single, unstepped env with the same spaces, for building networks and
            exploration (its action space is seeded with ``seed``).
        vec: The vector env that is stepped.
    """

    def __init__(self, env_id: str, seed: int, action_kind: ActionKind,
                 algorithm: str = "this algorithm", num_envs: int = 1) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} must be an int >= 1. "
                             "Fix: pass the number of environments to step together, e.g. 8.")
        self.env = make_env(env_id, seed, action_kind, algorithm)  # checks the action space
        self.vec = make_vector_env(env_id, num_envs)
        self.num_envs = num_envs
        self.obs_dim, self.action_dim = space_dims(self.env)
        self.discrete = action_kind == "discrete"
        self.obs = np.asarray(self.vec.reset(seed=int(seed))[0], dtype=np.float32)
        self.resetting = np.zeros(num_envs, dtype=bool)  # the next step of these is a reset
        self.episode_return = np.zeros(num_envs)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        self._idle_actions = idle_actions(self.env.action_space, num_envs)

    def run(self, steps_per_env: int, policy: BatchPolicy) -> Fragment:
        """Step until the envs have taken ``T * N`` real steps (``T = steps_per_env``).

        A vector step adds one transition per env that was not resetting, so the fragment
        holds at least ``T * N`` and fewer than ``T * N + N`` transitions; with one env,
        exactly ``T``. Episodes continue across calls.

        Args:
            steps_per_env: ``T``.
            policy: Maps observations ``(N, obs_dim)`` float32 to actions ``(N,)`` (discrete)
                or ``(N, act_dim)`` (continuous). It is not called for a vector step in which
                every env is resetting.

        Returns:
            A :class:`Fragment` of ``M`` transitions: ``obs``/``next_obs`` ``(M, obs_dim)``,
            ``actions`` ``(M,)`` or ``(M, act_dim)``, ``rewards``/``terminations`` ``(M,)``.
        """
        want = steps_per_env * self.num_envs
        parts: list[tuple[np.ndarray, ...]] = []
        returns: list[float] = []
        lengths: list[int] = []
        taken = 0
        while taken < want:
            if self.resetting.all():  # nothing to decide: every copy starts a new episode
                actions = self._idle_actions
            else:
                actions = np.asarray(policy(self.obs))
            next_obs, rewards, terminated, truncated, _ = self.vec.step(actions)
            next_obs = np.asarray(next_obs, dtype=np.float32)
            real = ~self.resetting  # the reset copies' rows are not transitions
            ended = real & (np.asarray(terminated) | np.asarray(truncated))
            self.episode_return[real] += rewards[real]
            self.episode_length[real] += 1
            returns += self.episode_return[ended].tolist()
            lengths += self.episode_length[ended].tolist()
            self.episode_return[ended], self.episode_length[ended] = 0.0, 0
            # next_obs is the true next state, even when the episode was cut by a time limit;
            # truncation is NOT termination: it bootstraps
            parts.append((self.obs[real], actions[real], rewards[real], next_obs[real],
                          np.asarray(terminated)[real], np.flatnonzero(real), ended[real]))
            taken += int(real.sum())
            self.obs, self.resetting = next_obs, ended
        obs, act, rew, nxt, term, ids, ends = (np.concatenate(column) for column in zip(*parts))
        act = act.astype(np.int64 if self.discrete else np.float32, copy=False)
        batch = Batch(obs, act, rew.astype(np.float32), nxt, term.astype(np.float32))
        return Fragment(batch, ids.astype(np.int64), ends, returns, lengths)

    def close(self) -> None:
        self.vec.close()
        self.env.close()
