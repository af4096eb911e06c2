"""A CartPole that sleeps at every step: a stand-in for a slow simulator, for the demos of
notebooks 05 (a slow worker) and 06 (a slow simulator).

Nothing in rlkit imports this module. Name an environment by its id (:data:`SLOW_CARTPOLE`,
:data:`SLOW_SIMULATOR`), gymnasium's ``"module:Name"`` form: ``gym.make`` imports this module
first, which registers the ids, so a Ray worker builds it from the id alone. Sleeping costs
wall-clock time but no CPU, so a slow worker leaves the cores to the others, as a worker waiting
on a real simulator or a remote machine would.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

#: Seconds each step of :data:`SLOW_CARTPOLE` sleeps.
SLEEP_SECONDS = 0.001


class SlowCartPole(CartPoleEnv):
    """CartPole whose ``step`` first sleeps ``sleep_seconds``."""

    def __init__(self, sleep_seconds: float = SLEEP_SECONDS,
                 render_mode: str | None = None) -> None:
        super().__init__(render_mode=render_mode)
        self.sleep_seconds = sleep_seconds

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        time.sleep(self.sleep_seconds)
        return super().step(action)


SLOW_CARTPOLE = f"{__name__}:rlkit/SlowCartPole-v1"

#: Seconds each step of :data:`SLOW_SIMULATOR` sleeps: notebook 06's slow simulator, twice
#: notebook 05's slow worker, so that a step costs about a hundred CartPole steps (with the
#: policy) on the 2-core VM, and still tens of them on a machine three times slower.
SIMULATOR_SLEEP_SECONDS = 0.002
SLOW_SIMULATOR = f"{__name__}:rlkit/SlowCartPole2ms-v1"


def register() -> None:
    """Register :data:`SLOW_CARTPOLE` and :data:`SLOW_SIMULATOR` (idempotent), with
    CartPole-v1's 500-step limit."""
    for env_id, seconds in ((SLOW_CARTPOLE, SLEEP_SECONDS),
                            (SLOW_SIMULATOR, SIMULATOR_SLEEP_SECONDS)):
        name = env_id.partition(":")[2]
        if name not in gym.registry:
            gym.register(name, entry_point=SlowCartPole, max_episode_steps=500,
                         kwargs={"sleep_seconds": seconds})


register()  # on import: gym.make("rlkit.testing.slow_envs:...") imports this module
