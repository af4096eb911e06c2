"""The one env runner: every pattern steps its environments here and gets one time-major
record back (:class:`Fragment`).

Replay (DQN, SAC, Ape-X) flattens a fragment into transitions (:attr:`Fragment.batch`); A2C
and IMPALA consume it as it is, ``(T, N)``, with the behaviour log-probabilities the policy
returned beside its actions. Time-limit truncation is stored apart from termination (it
bootstraps), either flag ends the episode, and finished episodes' returns are reported. A NaN
or infinite reward or observation is refused where it comes out (:mod:`rlkit.envs.finite`).

The environments are one gymnasium vector env: the environment's own vectorised implementation
when it has one (``gym.make_vec(..., vectorization_mode="vector_entry_point")``: CartPole steps
all its copies in a few numpy operations), else a ``SyncVectorEnv`` of single envs. Gymnasium
1.x vector envs reset a finished copy **on the next step** (``AutoresetMode.NEXT_STEP``): the
step that ends an episode returns its real final observation, and the following ``step`` call
ignores that copy's action and returns the new episode's first observation with reward 0. That
reset step is not a transition: the fragment marks it in ``resets``, replay leaves it out and
on-policy losses mask it. This is the only place autoreset is handled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, partial

import gymnasium as gym
import numpy as np
import torch

from rlkit.core.spaces import check_frames, obs_spec
from rlkit.core.types import ActionKind, Batch, BatchPolicy, SamplingPolicy, StatefulPolicy
from rlkit.envs.finite import CheckedFrames, check_env_output
from rlkit.envs.make import make_env, space_dims
from rlkit.envs.snapshot import env_state, load_env_state


@dataclass
class Fragment:
    """``T`` vector steps of ``N`` environments, time-major: what one :meth:`EnvRunner.run` call
    returns and what a worker ships, whatever the algorithm.

    A row ``(t, j)`` is either a real step of env ``j`` or a **reset row**: the vector step in
    which env ``j``, whose episode ended at ``t - 1``, was reset (gymnasium's next-step
    autoreset: its action was ignored, its reward is 0, ``next_obs`` is the new episode's first
    observation). Reset rows are not transitions: replay leaves them out (:attr:`batch`), and
    on-policy losses mask them out (:attr:`resets`). Episode ends cut every return and trace at
    the row where they happen, so a reset row never leaks into the steps before it.

    Attributes:
        obs: ``(T, N, *obs_shape)``, the observation each action was chosen in: ``(T, N,
            obs_dim)`` float32 for a vector, frames as the env returns them (uint8) for an
            image (see :mod:`rlkit.core.spaces`).
        actions: ``(T, N)`` int64 (discrete) or ``(T, N, act_dim)`` float32 (continuous).
        rewards: ``(T, N)`` float32.
        terminations: ``(T, N)`` float32, 1.0 where the episode truly ended at this step.
        truncations: ``(T, N)`` float32, 1.0 where a time limit cut the episode at this step
            (and it did not also terminate): it still bootstraps, from ``next_obs``.
        next_obs: like ``obs``, the real observation after the step (for a
            truncation, the final observation, never a reset one).
        resets: ``(T, N)`` bool, True on reset rows.
        log_probs: ``(T, N)`` float32 ``log mu(a_t|x_t)`` of the acting policy when it returns
            log-probabilities beside its actions (IMPALA, A2C), else ``None``; 0 on a step in
            which every env was resetting (the policy was not called).
        episode_returns: Returns of the episodes that finished inside the fragment.
        episode_lengths: Their lengths in steps.
        policy_state: For a :class:`~rlkit.core.types.StatefulPolicy`, its state ``(N, ...)``
            at the fragment's first row (a learner replays the rows from it, resetting an env's
            state after its reset row, as the runner did); ``None`` for a stateless policy.
        policy_version: Version of the weights that acted (set by the worker that ships it).
        worker: Index of the worker that collected it.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    next_obs: np.ndarray
    resets: np.ndarray
    log_probs: np.ndarray | None = None
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    policy_state: np.ndarray | None = None
    policy_version: int = 0
    worker: int = 0

    @property
    def num_steps(self) -> int:
        """Real env steps in the fragment (reset rows left out)."""
        return int(self.resets.size - self.resets.sum())

    @property
    def ends(self) -> np.ndarray:
        """``(T, N)`` bool, True where the episode ended (terminated or truncated)."""
        return (self.terminations > 0) | (self.truncations > 0)

    @cached_property
    def batch(self) -> Batch:
        """The real steps as ``M`` transitions for a replay buffer, in the order they were
        taken (step by step, env by env within a step); reset rows left out."""
        real = ~self.resets
        return Batch(self.obs[real], self.actions[real], self.rewards[real], self.next_obs[real],
                     self.terminations[real])

    @property
    def batch_env_ids(self) -> np.ndarray:
        """``(M,)`` int64, the env of each row of :attr:`batch`: the rows of one env are its
        consecutive steps (n-step returns group by it)."""
        return np.nonzero(~self.resets)[1].astype(np.int64)

    @property
    def batch_ends(self) -> np.ndarray:
        """``(M,)`` bool, True where the row of :attr:`batch` ended its episode: that env's
        next row starts a new one (n-step returns need it, since ``terminations`` marks only
        true terminations)."""
        return self.ends[~self.resets]


PER_STEP_FIELDS = ("actions", "rewards", "terminations", "truncations", "resets")


def check_fragment(fragment: Fragment, need_log_probs: bool = False) -> None:
    """Raise ``ValueError`` naming the field and the fix if a fragment's arrays disagree in
    ``T`` or ``N`` (or it lacks the log-probabilities an off-policy correction needs)."""
    obs = fragment.obs
    if obs.ndim < 3 or obs.shape[0] < 1:
        raise ValueError(f"obs has shape {obs.shape}, but a fragment needs (T, N, *obs_shape) "
                         f"with T >= 1. Fix: collect at least one step per environment.")
    t_n = obs.shape[:2]
    if fragment.next_obs.shape != obs.shape:
        raise ValueError(f"next_obs has shape {fragment.next_obs.shape} but obs has {obs.shape}."
                         f" Fix: store one next observation per step.")
    names = PER_STEP_FIELDS + (("log_probs",) if need_log_probs else ())
    for name in names:
        value = getattr(fragment, name)
        if value is None:
            raise ValueError(f"{name} is None, but this learner needs the behaviour policy's "
                             f"log-probabilities. Fix: act with a policy that returns (actions, "
                             f"log_probs), e.g. rlkit.algos.actor_critic.sampling_policy.")
        if value.shape[:2] != t_n:
            raise ValueError(f"{name} has shape {value.shape} but obs has {obs.shape}, so {name} "
                             f"must start with {t_n} (T steps x N envs). Fix: give every "
                             f"per-step field the same T and N.")


def make_vector_env(env_id: str, num_envs: int, frames: bool = False) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` as one vector env with next-step autoreset: the
    environment's native vector implementation if it registers one, else ``SyncVectorEnv``
    (of :class:`~rlkit.envs.finite.CheckedFrames` copies if ``frames``: an image env)."""
    name = env_id.partition(":")[2] if ":" in env_id else env_id  # make_env imported the module
    native = gym.spec(name).vector_entry_point is not None
    # an image env's copies check their frames before the vector env stacks them (a vector
    # env's are checked after: a wrapper of ours would stop its state from being saved)
    images = not native and frames
    vec = gym.make_vec(name, num_envs,
                       vectorization_mode="vector_entry_point" if native else "sync",
                       wrappers=[partial(CheckedFrames, env_id=env_id)] if images else None)
    mode = vec.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:  # pragma: no cover - gymnasium's default
        vec.close()
        raise ValueError(f"{env_id}'s vector env resets with {mode}; EnvRunner handles "
                         "gymnasium's default NEXT_STEP autoreset only. Fix: register the "
                         "environment with autoreset_mode=AutoresetMode.NEXT_STEP.")
    return vec


def seed_spaces(vec: gym.vector.VectorEnv, seed: int) -> None:
    """Seed the random streams of ``vec``'s spaces and of its copies' spaces, which gymnasium
    otherwise draws from the OS on first use: nothing here samples them, but a runner built
    from one seed is then the same object every time, down to its last stream."""
    owners = [vec, *(env.unwrapped for env in getattr(vec, "envs", []))]
    for k, owner in enumerate(owners):
        for name in ("action_space", "observation_space", "single_action_space",
                     "single_observation_space"):
            space = getattr(owner, name, None)
            if space is not None:
                space.seed(seed + k)


def idle_actions(space: gym.Space, num_envs: int) -> np.ndarray:
    """``num_envs`` valid actions to pass when every copy is resetting (the env ignores them):
    action 0, or the point of the box nearest the origin. Drawing no random number keeps the
    exploration streams unchanged."""
    if isinstance(space, gym.spaces.Discrete):
        return np.full(num_envs, space.start, dtype=np.int64)
    return np.tile(np.clip(0.0, space.low, space.high).astype(np.float32), (num_envs, 1))


#: The runner's own per-env state besides the envs': what :meth:`EnvRunner.state_dict` saves.
RUNNER_STATE = ("obs", "resetting", "episode_return", "episode_length")


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
        images: Whether ``algorithm`` takes image observations (else an image env is refused).

    Attributes:
        env: A single, unstepped env with the same spaces, for building networks and
            exploration (its action space is seeded with ``seed``).
        vec: The vector env that is stepped.
        obs_spec: The observation's shape and the dtype it is kept in (:mod:`rlkit.core.spaces`).
    """

    def __init__(self, env_id: str, seed: int, action_kind: ActionKind,
                 algorithm: str = "this algorithm", num_envs: int = 1,
                 images: bool = False) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} must be an int >= 1. "
                             "Fix: pass the number of environments to step together, e.g. 8.")
        self.env = make_env(env_id, seed, action_kind, algorithm, images)  # checks the spaces
        self.obs_spec = obs_spec(self.env.observation_space, env_id, algorithm, images)
        self.vec = make_vector_env(env_id, num_envs, self.obs_spec.kind == "image")
        self.num_envs = num_envs
        self.obs_dim, self.action_dim = space_dims(self.env)
        self.discrete = action_kind == "discrete"
        self.env_id = env_id
        self.obs = check_frames(env_id, self.vec.reset(seed=int(seed))[0], self.obs_spec)
        check_env_output(env_id, self.obs)
        seed_spaces(self.vec, int(seed))
        self.resetting = np.zeros(num_envs, dtype=bool)  # the next step of these is a reset
        self.episode_return = np.zeros(num_envs)
        self.episode_length = np.zeros(num_envs, dtype=np.int64)
        self._idle_actions = idle_actions(self.env.action_space, num_envs)
        self._zero_log_probs = np.zeros(num_envs, np.float32)
        self.policy_state: np.ndarray | None = None  # a StatefulPolicy's, between calls

    def run(self, steps_per_env: int, policy: BatchPolicy | SamplingPolicy | StatefulPolicy,
            fixed_length: bool = False) -> Fragment:
        """Step all ``N`` envs together; episodes continue across calls.

        Args:
            steps_per_env: ``T``.
            policy: Maps observations ``(N, *obs_shape)`` to actions ``(N,)`` (discrete)
                or ``(N, act_dim)`` (continuous), or to ``(actions, log_probs)`` with
                ``log_probs`` ``(N,)``. It is not called for a vector step in which every env
                is resetting. A :class:`~rlkit.core.types.StatefulPolicy` also takes and
                returns its state, which the runner keeps between calls and resets to the
                initial one for an env whose new episode begins (after its reset row).
            fixed_length: ``True``: exactly ``T`` vector steps, reset rows included (the
                on-policy shape: A2C and IMPALA batch fragments side by side). ``False``: as
                many vector steps as it takes for ``T * N`` real steps (the replay count), so
                ``fragment.batch`` holds at least ``T * N`` and fewer than ``T * N + N``
                transitions; with one env, exactly ``T``.

        Returns:
            The time-major :class:`Fragment`.
        """
        want = steps_per_env * self.num_envs
        rows: list[tuple[np.ndarray, ...]] = []
        returns: list[float] = []
        lengths: list[int] = []
        taken, sampled = 0, False  # sampled: the policy returned log-probabilities
        stateful = isinstance(policy, StatefulPolicy)  # (a plain function is not)
        initial = np.asarray(policy.initial_state(self.num_envs)) if stateful else None
        first_state = self._start_state(initial) if initial is not None else None
        while len(rows) < steps_per_env if fixed_length else taken < want:
            log_probs = self._zero_log_probs
            if self.resetting.all():  # nothing to decide: every copy starts a new episode
                actions = self._idle_actions
            else:
                if stateful:
                    out, chosen, self.policy_state = policy(self.obs, self.policy_state)
                    out = out if chosen is None else (out, chosen)
                else:
                    out = policy(self.obs)
                if isinstance(out, tuple):
                    out, log_probs = out
                    sampled = True
                actions = np.asarray(out)
            next_obs, rewards, terminated, truncated, _ = self.vec.step(actions)
            next_obs = check_frames(self.env_id, next_obs, self.obs_spec)
            terminated, truncated = np.asarray(terminated), np.asarray(truncated)
            real = ~self.resetting  # the reset copies' rows are not transitions
            ended = real & (terminated | truncated)
            self.episode_return[real] += rewards[real]
            self.episode_length[real] += 1
            check_env_output(self.env_id, next_obs, rewards, self.episode_length)
            returns += self.episode_return[ended].tolist()
            lengths += self.episode_length[ended].tolist()
            self.episode_return[ended], self.episode_length[ended] = 0.0, 0
            # next_obs is the true next state, even when the episode was cut by a time limit;
            # truncation is NOT termination: it bootstraps
            rows.append((self.obs, actions, rewards, terminated, truncated & ~terminated,
                         next_obs, self.resetting, log_probs))
            taken += int(real.sum())
            if stateful and self.resetting.any():  # these envs' new episodes start afresh
                mask = self.resetting.reshape((-1,) + (1,) * (initial.ndim - 1))
                self.policy_state = np.where(mask, initial, np.asarray(self.policy_state))
            self.obs, self.resetting = next_obs, ended
        obs, act, rew, term, trunc, nxt, resets, logp = (np.stack(c) for c in zip(*rows))
        act = act.astype(np.int64 if self.discrete else np.float32, copy=False)
        return Fragment(obs, act, rew.astype(np.float32), term.astype(np.float32),
                        trunc.astype(np.float32), nxt, resets,
                        logp.astype(np.float32) if sampled else None,
                        returns, lengths, first_state)

    def _start_state(self, initial: np.ndarray) -> np.ndarray:
        """A copy of the state the runner holds for a stateful policy (its ``initial`` one if
        the runner holds none, or one of another shape, e.g. another policy's)."""
        if self.policy_state is None or self.policy_state.shape != initial.shape:
            self.policy_state = initial
        return self.policy_state.copy()

    def state_dict(self) -> dict:
        """The exact state of the envs and of the episodes in progress (see
        :mod:`rlkit.envs.snapshot`); raises :class:`rlkit.envs.snapshot.EnvStateUnsupported`
        for an env whose state is not plain numbers."""
        return {"vec": env_state(self.vec), "env": env_state(self.env),
                **{name: torch.from_numpy(getattr(self, name).copy()) for name in RUNNER_STATE}}

    def load_state_dict(self, state: dict) -> None:
        """Continue from a :meth:`state_dict` of a runner built the same way: the next
        :meth:`run` takes the steps the saved runner would have taken."""
        load_env_state(self.vec, state["vec"])
        load_env_state(self.env, state["env"])
        for name in RUNNER_STATE:
            value = state[name].numpy().copy()
            if value.shape != getattr(self, name).shape:
                raise ValueError(f"the checkpoint's runner held {value.shape[0]} envs, this one "
                                 f"{self.num_envs}. Fix: resume with the same num_envs.")
            setattr(self, name, value)

    def close(self) -> None:
        self.vec.close()
        self.env.close()
