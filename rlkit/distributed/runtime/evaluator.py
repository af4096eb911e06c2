"""The evaluator role, shared by the drivers that run evaluation as an actor (off-policy replay
and Ape-X): greedy episodes with given weights, in its own process, on the fresh seeds of
:func:`rlkit.core.common.eval_seed`."""

from __future__ import annotations

import numpy as np
import torch

from rlkit.core.networks import load_numpy_weights
from rlkit.core.types import OffPolicyAlgorithm, Weights
from rlkit.envs.evaluation import evaluate_policy
from rlkit.envs.make import make_env


class Evaluator:
    """Runs deterministic (greedy) episodes with given weights, in its own process."""

    def __init__(self, algo: OffPolicyAlgorithm) -> None:
        torch.set_num_threads(1)
        self.algo = algo
        env = make_env(algo.config.env_id, algo.config.seed, algo.action_kind, algo.name,
                       algo.images)
        self.net = algo.make_policy_network(env).requires_grad_(False)
        env.close()

    def ping(self) -> bool:
        return True

    def evaluate(self, weights: Weights, episodes: int, seed: int) -> np.ndarray:
        """``(episodes,)`` returns of the policy with ``weights``, without exploration."""
        load_numpy_weights(self.net, weights)
        return evaluate_policy(self.algo.evaluation_policy(self.net), self.algo.config.env_id,
                               episodes, seed)
