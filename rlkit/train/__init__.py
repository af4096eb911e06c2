"""Training in one process: the loop (:mod:`rlkit.train.loop`) and checkpoints."""

from rlkit.train.loop import TrainResult, train_dqn, train_sac, train_single_process

__all__ = ["TrainResult", "train_dqn", "train_sac", "train_single_process"]
