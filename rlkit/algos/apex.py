"""Ape-X (Horgan et al. 2018): the settings of the distributed system, and DQN and DDPG as the
algorithms it runs.

Ape-X is not a new loss: it is DQN (or DDPG) fed by many actors through a sharded prioritized
replay. So an :class:`ApexAlgorithm` is the algorithm's own config and learner
(:mod:`rlkit.algos.dqn`, :mod:`rlkit.algos.ddpg`, unchanged) plus what the actors need: an
exploration ladder (one rung per env, fixed for the run) and a priority model (a copy of the
online and target networks that scores the actor's own transitions before they are sent).
The roles that use them are in :mod:`rlkit.distributed.apex.roles`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from torch import nn

from rlkit.algos.ddpg import DDPGConfig, DDPGPriorityModel, DDPGSpec, gaussian_exploration_policy
from rlkit.algos.dqn import DQNConfig, DQNPriorityModel, DQNSpec
from rlkit.algos.exploration import epsilon_ladder, noise_ladder
from rlkit.core.spaces import obs_spec
from rlkit.core.types import ActionKind, BatchPolicy, Learner, UpdateReport
from rlkit.core.validation import Validated, fail, integer, number
from rlkit.envs.make import space_dims

if TYPE_CHECKING:
    import gymnasium as gym


@dataclass(frozen=True)
class ApexConfig(Validated):
    """The distributed system's settings beyond the workers' count and shape, which are the
    algorithm config's (:class:`~rlkit.core.workers.WorkerShape`: ``num_workers``,
    ``envs_per_worker``, ``fragment_steps``).

    On a 2-core machine the exploration ladder gets its rungs from env copies, not processes:
    ``num_workers * envs_per_worker`` rungs (``config.num_actors``; see
    :mod:`rlkit.algos.exploration`).
    """

    num_shards: int = integer(2, 1)
    n_step: int = integer(3, 1)  # Ape-X's n-step length (the algorithm config's n_step stays 1)
    alpha: float = number(0.6, at_least=0, at_most=1)  # prioritisation exponent
    beta_start: float = number(0.4, at_least=0, at_most=1)  # IS exponent, annealed to 1
    publish_every: int = integer(16, 1)  # learner updates between weight versions
    updates_per_call: int = integer(16, 1)  # most learner updates per remote call
    eps_base: float = number(0.4, above=0, below=1)  # eps_i = eps_base ** (1 + spread * i/(N-1))
    eps_spread: float = number(7.0, at_least=0, at_most=50)
    sigma_max: float = number(0.5, above=0, below=10)  # DDPG ladder: std / action half-range
    sigma_min: float = number(0.05, above=0, below=10)

    def check(self) -> None:
        if self.sigma_min > self.sigma_max:
            fail("sigma_min", self.sigma_min, f"is above sigma_max={self.sigma_max}",
                 "use sigma_max=0.5, sigma_min=0.05")


def check_apex_pair(name: str, config: Any, expected: type, apex: Any) -> None:
    """Refuse the wrong config types, more shards than the algorithm config's workers (each
    worker writes to one shard), and a setting both configs hold with different values (Ape-X's
    ``n_step`` is :class:`ApexConfig`'s; the algorithm's must stay at 1 or agree)."""
    if not isinstance(config, expected):
        raise TypeError(f"{name} takes a {expected.__name__} as its config, got "
                        f"{type(config).__name__}. Fix: {name}({expected.__name__}(...), "
                        f"ApexConfig(...)).")
    if not isinstance(apex, ApexConfig):
        raise TypeError(f"{name} takes an ApexConfig as apex, got {type(apex).__name__}. Fix: "
                        f"{name}({expected.__name__}(...), ApexConfig(...)).")
    if apex.num_shards > config.num_workers:
        fail("num_shards", apex.num_shards, f"exceeds {expected.__name__}.num_workers="
             f"{config.num_workers}", "each worker writes to one shard: use num_shards <= "
             "num_workers")
    n_step = getattr(config, "n_step", 1)
    if n_step not in (1, apex.n_step):
        fail(f"{expected.__name__}.n_step", n_step, f"conflicts with ApexConfig.n_step="
             f"{apex.n_step}: under Ape-X the workers build the n-step windows, with ApexConfig's "
             f"n", f"set ApexConfig(n_step={n_step}) and leave {expected.__name__}.n_step at 1")


class PriorityModel(Protocol):
    def load(self, weights: Any) -> None: ...

    def td_errors(self, batch: Any) -> np.ndarray: ...


class PrioritizedLearner(Learner, Protocol):
    """What an Ape-X learner adds to a :class:`~rlkit.core.types.Learner`."""

    def update_prioritized(self, batch: Any, importance_weights: np.ndarray
                           ) -> tuple[UpdateReport, np.ndarray]:
        """One update on the importance-weighted loss ``mean_i(w_i * loss_i)``.

        Args:
            batch: ``B`` transitions sampled with priorities (an ``NStepBatch`` in Ape-X).
            importance_weights: ``(B,)`` the sampler's ``w_i``.

        Returns:
            ``(report, td_errors)``: the update's report and ``(B,)`` float32
            ``|delta_i|`` from the update's own forward pass, before its gradient step: the
            transitions' new priorities.
        """
        ...


class ApexAlgorithm(Protocol):
    """What the Ape-X roles need of an algorithm."""

    name: str
    action_kind: ActionKind
    images: bool  # whether it takes image observations (ApexDQN: yes, ApexDDPG: no)
    config: Any  # the algorithm's config: a ReplayConfig with ``gamma`` and ``hidden``
    apex: ApexConfig

    def ladder(self, num_actors: int) -> np.ndarray: ...

    def make_priority_model(self, env: gym.Env) -> PriorityModel: ...

    def acting_network(self, model: PriorityModel) -> nn.Module: ...

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           rungs: np.ndarray) -> BatchPolicy: ...

    def make_policy_network(self, env: gym.Env) -> nn.Module: ...

    def evaluation_policy(self, net: nn.Module) -> BatchPolicy: ...

    def make_learner(self, env: gym.Env, device: torch.device) -> PrioritizedLearner: ...

    def replay_action_dim(self, env: gym.Env) -> int | None: ...


def check_apex_algorithm(owner: str, algo: Any) -> None:
    """Refuse, before anything starts, an ``algo`` that is not an :class:`ApexAlgorithm` (any
    class with its members runs: ``ApexDQN``, ``ApexDDPG`` or your own), naming what it lacks."""
    members = [*ApexAlgorithm.__annotations__,
               *(n for n in vars(ApexAlgorithm) if not n.startswith("_"))]
    missing = [m for m in dict.fromkeys(members) if not hasattr(algo, m)]
    if missing:
        raise TypeError(f"{owner} takes an Ape-X algorithm (an ApexAlgorithm: ApexDQN, ApexDDPG "
                        f"or your own), got {type(algo).__name__}, which lacks "
                        f"{', '.join(missing)}. Fix: {owner}(ApexDQN(DQNConfig(...), "
                        f"ApexConfig(...))).")


class ApexDQN(DQNSpec):
    """DQN under Ape-X: each env acts epsilon-greedily at its own fixed epsilon."""

    name = "Ape-X DQN"

    def __init__(self, config: DQNConfig, apex: ApexConfig = ApexConfig()) -> None:
        check_apex_pair("ApexDQN", config, DQNConfig, apex)
        super().__init__(config)
        self.apex = apex

    def ladder(self, num_actors: int) -> np.ndarray:
        return epsilon_ladder(num_actors, self.apex.eps_base, self.apex.eps_spread)

    def make_priority_model(self, env: gym.Env) -> DQNPriorityModel:
        return DQNPriorityModel(obs_spec(env.observation_space), space_dims(env)[1],
                                self.config)

    @staticmethod
    def acting_network(model: DQNPriorityModel) -> nn.Module:
        return model.q

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           rungs: np.ndarray | Callable[[], float]) -> BatchPolicy:
        """Epsilon-greedy with ``rungs`` ``(N,)``: env ``j`` explores with ``rungs[j]``."""
        epsilons = rungs if callable(rungs) else (lambda: rungs)
        return super().exploration_policy(net, env, rng, epsilons)

    @staticmethod
    def replay_action_dim(env: gym.Env) -> int | None:
        return None


class ApexDDPG(DDPGSpec):
    """DDPG under Ape-X: each env adds Gaussian noise of its own fixed scale."""

    name = "Ape-X DDPG"

    def __init__(self, config: DDPGConfig, apex: ApexConfig = ApexConfig()) -> None:
        check_apex_pair("ApexDDPG", config, DDPGConfig, apex)
        super().__init__(config)
        self.apex = apex

    def ladder(self, num_actors: int) -> np.ndarray:
        return noise_ladder(num_actors, self.apex.sigma_max, self.apex.sigma_min)

    def make_priority_model(self, env: gym.Env) -> DDPGPriorityModel:
        space = env.action_space
        return DDPGPriorityModel(*space_dims(env), space.low, space.high, self.config)

    @staticmethod
    def acting_network(model: DDPGPriorityModel) -> nn.Module:
        return model.actor

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           rungs: np.ndarray | Callable[[], float]) -> BatchPolicy:
        """Gaussian noise with std ``rungs[j] * (high - low) / 2`` for env ``j``."""
        if callable(rungs):  # the single-process interface: one noise scale, with warm-up
            return super().exploration_policy(net, env, rng, rungs)
        space = env.action_space
        std = np.asarray(rungs, dtype=np.float32)[:, None] * (space.high - space.low) / 2
        return gaussian_exploration_policy(net, rng, space.low, space.high, std, lambda: 0.0)

    @staticmethod
    def replay_action_dim(env: gym.Env) -> int:
        return space_dims(env)[1]
