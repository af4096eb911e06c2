"""Which on-policy algorithm a config trains, for the loops and roles that run all three
(IMPALA's one-process loop, the actor-learner queue driver and its learner role): its name, the
action kind it acts with, and its learner. A :class:`~rlkit.algos.ppo.PPOConfig` trains PPO
(synchronous) or APPO; any other :class:`~rlkit.algos.impala.IMPALAConfig` trains IMPALA.
"""

from __future__ import annotations

from rlkit.algos.impala import IMPALAConfig, VTraceLearner
from rlkit.algos.policy_heads import action_kind_of
from rlkit.algos.ppo import PPOConfig, PPOLearner
from rlkit.core.types import ActionKind


def algorithm_name(config: IMPALAConfig) -> str:
    """``"PPO"``, ``"APPO"`` or ``"IMPALA"``: what ``config`` trains, in progress bars, roles'
    errors and checkpoints."""
    if isinstance(config, PPOConfig):
        return "PPO" if config.synchronous else "APPO"
    return "IMPALA"


def config_action_kind(config: IMPALAConfig) -> ActionKind:
    """The action kind a run of ``config`` acts with: the env's for PPO and APPO (either),
    ``"discrete"`` for IMPALA (its learner is categorical; another env is refused where it is
    built, naming the field)."""
    return action_kind_of(config.env_id) if isinstance(config, PPOConfig) else "discrete"


def make_learner(config: IMPALAConfig, obs_dim: int, n_actions: int
                 ) -> VTraceLearner | PPOLearner:
    """The learner ``config`` asks for: :class:`PPOLearner` for a :class:`PPOConfig`, else
    IMPALA's :class:`VTraceLearner`. Both take ``update(fragments)``."""
    cls = PPOLearner if isinstance(config, PPOConfig) else VTraceLearner
    return cls(obs_dim, n_actions, config)
