"""One module per algorithm: its config, losses, learner and its ``OffPolicyAlgorithm`` (see
:mod:`rlkit.core.types`). Nothing here imports the training loops or Ray.

The configs and specs are importable from here (``from rlkit.algos import DQNConfig``); each is
imported from its module on first use."""

from rlkit.core.exports import lazy_exports

EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, {
    "dqn": ("DQNConfig", "DQNSpec"), "sac": ("SACConfig", "SACSpec", "LUNAR_LANDER"),
    "ddpg": ("DDPGConfig", "DDPGSpec"), "apex": ("ApexConfig", "ApexDQN", "ApexDDPG"),
    "a2c": ("A2CConfig",), "impala": ("IMPALAConfig",), "ppo": ("PPOConfig", "PENDULUM")})
__all__ = sorted(EXPORTS)
