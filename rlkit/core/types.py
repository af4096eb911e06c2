"""The shapes of the data every layer passes around, and the contract an algorithm fulfils.

This module sits at the bottom of rlkit: it imports nothing from the package, so any module
may import it. Torch and gymnasium appear only in type hints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import gymnasium as gym
    import torch
    from torch import nn

ActionKind = Literal["discrete", "continuous"]

#: Network weights as they travel between processes: ``{parameter name: numpy array}``.
Weights = dict[str, np.ndarray]

#: A batched policy: observations ``(N, *obs_shape)`` (see :class:`Batch`) -> actions ``(N,)``
#: (discrete) or ``(N, act_dim)`` (continuous).
BatchPolicy = Callable[[np.ndarray], np.ndarray]

#: A sampling policy (IMPALA, A2C): observations ``(N, *obs_shape)`` -> actions ``(N,)``
#: int64 and their log-probabilities ``(N,)`` float32 under the policy that chose them.
SamplingPolicy = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@runtime_checkable
class StatefulPolicy(Protocol):
    """A policy that carries a state from one step to the next (a recurrent network's hidden
    state), which :class:`rlkit.envs.runner.EnvRunner` keeps for it: across calls of ``run``,
    reset to ``initial_state`` for an env whose new episode begins, and recorded at the start of
    each fragment (``Fragment.policy_state``), so a learner can replay the steps from it."""

    def initial_state(self, num_envs: int) -> np.ndarray:
        """``(N, ...)`` float32: the state every episode starts from."""
        ...

    def __call__(self, obs: np.ndarray, state: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """``(obs (N, ...), state (N, ...))`` -> ``(actions (N, ...), log_probs (N,) or None,
        next state (N, ...))``."""
        ...


class Batch(NamedTuple):
    """A batch of ``B`` transitions, as numpy arrays. Observations keep the env's shape and
    dtype (:class:`~rlkit.core.spaces.ObsSpec`): ``(B, obs_dim)`` float32 for a vector,
    ``(B, C, H, W)`` uint8 for frames, converted to float only in the network.

    Attributes:
        obs: ``(B, *obs_shape)`` observations.
        actions: ``(B,)`` int64 for discrete actions, ``(B, act_dim)`` float32 for continuous.
        rewards: ``(B,)`` float32.
        next_obs: ``(B, *obs_shape)`` observations after the step.
        terminations: ``(B,)`` float32, 1.0 where the episode truly ended (a terminal state with
            no future reward). A time-limit truncation is stored as 0.0: its target still
            bootstraps from ``next_obs``.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminations: np.ndarray

    def __len__(self) -> int:
        return len(self.rewards)


class NStepBatch(NamedTuple):
    """A batch of ``B`` n-step transitions, as numpy arrays (Ape-X, notebook 04).

    Transition ``i`` starts at ``obs[i]`` with ``actions[i]`` and covers ``k_i <= n`` steps: fewer
    than ``n`` when the episode ended (terminated or truncated) inside the window.

    Attributes:
        obs: ``(B, *obs_shape)`` as in :class:`Batch`, the first observation of the window.
        actions: ``(B,)`` int64 or ``(B, act_dim)`` float32, the first action.
        rewards: ``(B,)`` float32, the discounted sum ``sum_{j<k} gamma**j r_{t+j}``.
        next_obs: ``(B, *obs_shape)``, the real observation after the window's last step
            (for a truncation: the final observation the env returned, not a reset one).
        terminations: ``(B,)`` float32, 1.0 if the window ended in a true termination.
        discounts: ``(B,)`` float32, ``gamma ** k_i``: the factor of the bootstrap value, so the
            target is ``rewards + discounts * (1 - terminations) * V(next_obs)``.
    """

    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_obs: np.ndarray
    terminations: np.ndarray
    discounts: np.ndarray

    def __len__(self) -> int:
        return len(self.rewards)


class FragmentStats(NamedTuple):
    """What a replay worker (off-policy or Ape-X) tells the driver about a fragment it
    collected; the transitions themselves go to the learner or to a replay shard.

    Attributes:
        worker: Index of the worker.
        env_steps: Real env steps in the fragment.
        episode_returns: Returns of the episodes that finished inside it.
        weights_version: Version of the weights the worker acted with.
        seconds: Time the worker spent on the call.
    """

    worker: int
    env_steps: int
    episode_returns: list[float]
    weights_version: int
    seconds: float


class TensorBatch(NamedTuple):
    """A :class:`Batch` as torch tensors on one device (same fields, same shapes)."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    terminations: torch.Tensor


class ReplayConfig(Protocol):
    """The config fields every off-policy driver reads (``DQNConfig`` and ``SACConfig`` have
    them all)."""

    env_id: str
    seed: int
    total_steps: int
    buffer_size: int
    batch_size: int
    learning_starts: int
    train_every: int
    eval_every: int
    eval_episodes: int
    target_return: float | None
    torch_threads: int
    num_workers: int  # the Ray run's shape (rlkit.core.workers.WorkerShape)
    envs_per_worker: int
    fragment_steps: int


class UpdateReport(Protocol):
    """What a learner's ``update`` returns: a NamedTuple of its own (``DQNReport``,
    ``SACReport``, ``PPOReport``, ...) whose ``loss`` the loops log; the rest are its extras,
    read by name (``report.approx_kl``), never by key."""

    @property
    def loss(self) -> Any: ...

    def _asdict(self) -> dict[str, Any]: ...


class Learner(Protocol):
    """What the drivers need of an algorithm's learner."""

    updates: int

    def update(self, batch: Any) -> UpdateReport: ...

    def get_weights(self) -> Weights: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class OffPolicyAlgorithm(Protocol):
    """Everything the generic off-policy machinery needs to know about one algorithm.

    The single-process loop (:mod:`rlkit.train.loop`), the distributed roles
    (:mod:`rlkit.distributed.off_policy.roles`) and the replay driver
    (:mod:`rlkit.distributed.off_policy.driver`) are written once against this protocol.
    ``rlkit.algos.dqn.DQN`` and ``rlkit.algos.sac.SAC`` implement it; a new off-policy algorithm
    plugs in by implementing it too (no registry to edit). An instance is small and picklable: it
    holds only the run's config, so it travels to every actor.
    """

    name: str  # "DQN", "SAC": used in messages and checkpoints
    action_kind: ActionKind
    images: bool  # whether it takes image observations (its networks have an encoder)
    config: ReplayConfig

    def random_action_prob(self, env_steps: int) -> float:
        """Probability that a behaviour action is uniformly random, after ``env_steps`` env
        steps of the whole system (DQN: epsilon; SAC: 1 during the warm-up, then 0)."""
        ...

    def make_policy_network(self, env: gym.Env) -> nn.Module: ...

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           random_action_prob: Callable[[], float]) -> BatchPolicy: ...

    def evaluation_policy(self, net: nn.Module) -> BatchPolicy: ...

    def policy_network_of(self, learner: Any) -> nn.Module: ...

    def make_learner(self, env: gym.Env, device: torch.device) -> Learner: ...

    def make_buffer(self, env: gym.Env, device: torch.device) -> Any: ...



class OnPolicyAlgorithm(Protocol):
    """What the on-policy machinery needs to know about one algorithm: its config says it.

    IMPALA's one-process loop (:mod:`rlkit.train.impala`), the actor-learner queue driver and
    its roles (:mod:`rlkit.distributed.impala`) are written once against this protocol.
    ``rlkit.algos.impala.IMPALAConfig`` implements it (IMPALA), and ``rlkit.algos.ppo.PPOConfig``
    overrides it (PPO, APPO). Acting and evaluating are shared: every on-policy learner's network
    is ``rlkit.algos.policy_heads.make_actor_critic(obs_dim, n_actions, hidden, action_kind)``,
    sampled by ``acting_policy`` and evaluated greedily. A new on-policy algorithm subclasses a
    config and overrides these three (see docs/architecture.md).
    """

    env_id: str
    hidden: tuple[int, ...]
    num_workers: int
    envs_per_worker: int

    @property
    def algorithm(self) -> str:
        """Its name in progress bars, roles' errors and checkpoints (``"IMPALA"``, ``"PPO"``)."""
        ...

    @property
    def action_kind(self) -> ActionKind: ...

    @property
    def images(self) -> bool:
        """Whether it takes image observations (its networks get an encoder)."""
        ...

    def make_learner(self, obs_dim: Any, n_actions: int) -> Any:
        """A learner with ``update(fragments) -> metrics``, ``get_weights()``,
        ``state_dict()``, ``load_state_dict()`` and an ``updates`` counter."""
        ...
