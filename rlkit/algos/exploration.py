"""Per-actor exploration ladders (Ape-X): each actor explores at its own fixed rate.

One shared, decaying epsilon (notebooks 01-02) makes every actor explore the same amount at the
same time. Ape-X instead gives actor ``i`` of ``N`` a fixed epsilon,

    eps_i = base ** (1 + spread * i / (N - 1)),    base = 0.4, spread = 7,

so some actors nearly always act greedily (eps_{N-1} = 0.4**8 = 0.00066: long, good episodes)
while others keep exploring (eps_0 = 0.4), for the whole run.

With fewer than about 3 actors the ladder has too few rungs: RLlib's CartPole example warns
that Ape-X is unstable then. On a 2-core machine we do not need more processes to get more
rungs: every env copy stepped by a worker is an "actor" of the ladder. 2 workers x 4 envs is a
ladder of 8 epsilons, with the same process count as 2 actors.
"""

from __future__ import annotations

import numpy as np


def epsilon_ladder(num_actors: int, base: float = 0.4, spread: float = 7.0) -> np.ndarray:
    """``(num_actors,)`` epsilons ``base ** (1 + spread * i / (N - 1))``; one actor gets
    ``base``."""
    if not isinstance(num_actors, int) or num_actors < 1:
        raise ValueError(f"num_actors={num_actors!r} must be an int >= 1.")
    if num_actors == 1:
        return np.array([base])
    return base ** (1.0 + spread * np.arange(num_actors) / (num_actors - 1))


def noise_ladder(num_actors: int, sigma_max: float, sigma_min: float) -> np.ndarray:
    """``(num_actors,)`` Gaussian action-noise scales for DDPG, spaced geometrically from
    ``sigma_max`` (actor 0, explores most) down to ``sigma_min``: the continuous-action
    counterpart of :func:`epsilon_ladder`; one actor gets ``sigma_max``."""
    if not isinstance(num_actors, int) or num_actors < 1:
        raise ValueError(f"num_actors={num_actors!r} must be an int >= 1.")
    if not 0 < sigma_min <= sigma_max:
        raise ValueError(f"need 0 < sigma_min <= sigma_max; got sigma_min={sigma_min}, "
                         f"sigma_max={sigma_max}. Fix: e.g. sigma_max=0.5, sigma_min=0.05.")
    if num_actors == 1:
        return np.array([sigma_max])
    return sigma_max * (sigma_min / sigma_max) ** (np.arange(num_actors) / (num_actors - 1))


def worker_rungs(worker_index: int, num_workers: int) -> slice:
    """The ladder rungs of worker ``worker_index``'s envs, dealt out like cards: env ``j`` of
    worker ``w`` is actor ``j * num_workers + w``. Every worker then holds both exploring and
    nearly greedy envs, so losing one worker never removes a whole end of the ladder."""
    return slice(worker_index, None, num_workers)
