"""One module per algorithm: its config, losses, learner and its ``OffPolicyAlgorithm`` (see
:mod:`rlkit.core.types`). Nothing here imports the training loops or Ray."""
