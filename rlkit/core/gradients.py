"""Data-parallel learning in one function: average the gradients over the ranks of a group.

Each of ``W`` learner ranks computes the mean loss over its own ``B / W`` samples. The mean of
the ranks' gradients is then the gradient of the mean loss over all ``B`` samples:

    (1/W) * sum_r grad[(1/(B/W)) * sum_{i in rank r} l_i]  =  grad[(1/B) * sum_i l_i]

so ``W`` ranks that all-reduce their gradients (sum, then divide by ``W``) before clipping and
stepping take exactly the step one learner would take on the whole batch, and, starting from
the same weights with the same optimiser, stay identical. A learner calls its
``sync_gradients(parameters)`` between ``backward()`` and the clip: :func:`no_sync` alone,
:func:`average_gradients` in a group (:mod:`rlkit.distributed.runtime.learner_group`).
:func:`gradient_step` is every learner's step in that order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

#: What a learner calls between ``backward()`` and clipping.
GradientSync = Callable[[Iterable[torch.nn.Parameter]], None]


def gradient_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor,
                  parameters: Iterable[torch.nn.Parameter], sync: GradientSync,
                  max_grad_norm: float | None = None) -> torch.Tensor | None:
    """One optimiser step on ``loss``: clear the gradients, backpropagate, ``sync`` them (a
    group's all-reduce, before the clip), clip their norm to ``max_grad_norm`` if given, step.
    Returns the norm before the clip (a tensor), or ``None`` without a clip."""
    params = list(parameters)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    sync(params)
    norm = None if max_grad_norm is None else torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    return norm


def no_sync(parameters: Iterable[torch.nn.Parameter]) -> None:
    """One learner: its gradients are already the batch's."""


def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Replace each gradient by its mean over the ranks of the default process group: one
    all-reduce of all gradients flattened into one buffer (one message per update, not one per
    tensor). Parameters without a gradient are left out, as an optimiser skips them; every rank
    runs the same code, so every rank sends the same layout."""
    import torch.distributed as dist

    params = [p for p in parameters if p.grad is not None]
    if not params:
        return
    grads = [p.grad for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)  # the sum over ranks
    flat /= dist.get_world_size()
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        p.grad = flat[offset:offset + n].view_as(g).clone()
        offset += n
