"""Training in one process: the loops and checkpoints. The trainers are importable from here
(``from rlkit.train import train_dqn``), each imported from its module on first use."""

from rlkit.core.exports import lazy_exports

EXPORTS, __getattr__, __dir__ = lazy_exports(__name__, {
    "loop": ("train_dqn", "train_sac", "train_single_process", "TrainResult"),
    "impala": ("train_impala", "IMPALAResult", "Pace"), "ppo": ("train_ppo",)})
__all__ = sorted(EXPORTS)
