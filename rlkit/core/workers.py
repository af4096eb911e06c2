"""How a Ray run spreads acting over rollout workers: the worker count and shape that the
off-policy configs (DQN, SAC, DDPG) hold beside what they learn, so that every Ray driver is
called the same way, ``train_<pattern>_ray(config, **options)``.

IMPALA, PPO and A2C declare their own ``num_workers`` and ``envs_per_worker`` (their fragment
length is ``unroll_length`` or ``n_steps``, a setting of what they learn).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlkit.core.validation import Validated, fail, integer


@dataclass(frozen=True)
class WorkerShape(Validated):
    """The shape of a Ray run's acting (a one-process trainer steps one env and reads none of it).

    Attributes:
        num_workers: Rollout workers (actor processes).
        envs_per_worker: Environments each worker steps in lockstep.
        fragment_steps: Env steps per worker call, over all of its envs (a multiple of
            ``envs_per_worker``).
    """

    num_workers: int = integer(2, 1)
    envs_per_worker: int = integer(1, 1)
    fragment_steps: int = integer(100, 1)

    def check(self) -> None:
        if self.fragment_steps % self.envs_per_worker:
            per_env = max(1, self.fragment_steps // self.envs_per_worker)
            fail("fragment_steps", self.fragment_steps,
                 f"is not a multiple of envs_per_worker={self.envs_per_worker}",
                 f"use {self.envs_per_worker * per_env}")

    @property
    def num_actors(self) -> int:
        """Env copies over all workers (Ape-X's actors: one exploration rung each)."""
        return self.num_workers * self.envs_per_worker
