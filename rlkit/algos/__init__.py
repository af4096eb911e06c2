"""One module per algorithm: its config, losses, learner and its ``OffPolicyAlgorithm`` (see
:mod:`rlkit.core.types`). Nothing here imports the training loops or Ray.

The configs and specs are importable from here (``from rlkit.algos import DQNConfig``); each is
imported from its module on first use."""

from rlkit.core.exports import lazy_exports

EXPORTS = {
    "DQNConfig": "dqn", "DQNSpec": "dqn",
    "SACConfig": "sac", "SACSpec": "sac", "LUNAR_LANDER": "sac",
    "DDPGConfig": "ddpg", "DDPGSpec": "ddpg",
    "ApexConfig": "apex", "ApexDQN": "apex", "ApexDDPG": "apex",
    "A2CConfig": "a2c",
    "IMPALAConfig": "impala",
    "PPOConfig": "ppo", "PENDULUM": "ppo",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
