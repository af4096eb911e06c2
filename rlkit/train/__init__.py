"""Training in one process: the loops and checkpoints. The trainers are importable from here
(``from rlkit.train import train_dqn``), each imported from its module on first use."""

from rlkit.core.exports import lazy_exports

EXPORTS = {
    "train_dqn": "loop", "train_sac": "loop", "train_single_process": "loop",
    "TrainResult": "loop",
    "train_impala": "impala", "IMPALAResult": "impala",
    "train_ppo": "ppo",
}
__all__ = sorted(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
