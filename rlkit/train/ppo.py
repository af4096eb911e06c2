"""PPO in one process: collect a batch with the current weights, learn from it for a few epochs,
repeat. It is IMPALA's one-process loop (:func:`rlkit.train.impala.train_impala`) with no
policy lag and PPO's learner; reproducible for a given config, and the reference the Ray
versions are checked against.
"""

from __future__ import annotations

from typing import Any

from rlkit.algos.ppo import PPOConfig
from rlkit.core.validation import fail, require_instance
from rlkit.train.impala import ON_POLICY_CHECKPOINT_OPTIONS, IMPALAResult, train_impala
from rlkit.train.options import refuse_other_options


def train_ppo(config: PPOConfig, **options: Any) -> IMPALAResult:
    """Train PPO in this process: ``config.num_workers`` runners (seeded as the Ray workers
    are) stepped in turn for each batch of ``batch_fragments`` fragments, every one acted by
    the weights being trained; a greedy evaluation every ``eval_every`` env steps; stops at the
    first evaluation that reaches ``target_return`` or at ``total_steps``.

    Returns:
        An :class:`IMPALAResult` (``updates``: batches learned; ``diagnostics``: PPO's
        ``approx_kl``, ``clip_fraction`` and loss parts, one entry per batch).
    """
    require_instance("train_ppo", "config", config, PPOConfig, "train_ppo(PPOConfig())")
    refuse_other_options("train_ppo", options, ("progress", *ON_POLICY_CHECKPOINT_OPTIONS),
                         "train_ppo_ray(config, ...)")
    if not config.synchronous:
        fail("synchronous", config.synchronous, "is APPO, but train_ppo trains on-policy (every "
             "batch acted by the weights being trained)", "call train_appo_ray(config) for APPO "
             "on Ray, or train_impala(config, policy_lag=k) to simulate its lag in one process")
    return train_impala(config, policy_lag=0, **options)
