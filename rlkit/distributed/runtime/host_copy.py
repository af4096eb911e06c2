"""Copying a network's weights from the GPU to the host without stopping the GPU.

``tensor.cpu()`` waits until every kernel queued before it has finished, so a learner that
publishes weights that way stalls its stream each time. :class:`HostCopy` instead queues the
copies into page-locked ("pinned") host buffers with ``non_blocking=True`` and records a CUDA
event behind them; the learner keeps queueing updates, and the weights are handed out only
once the event reports that the copies are complete, so no reader ever sees a half-copied
version.
"""

from __future__ import annotations

import torch
from torch import nn

from rlkit.core.types import Weights


class HostCopy:
    """Pinned host buffers for ``module``'s ``state_dict`` and the copy in flight, if any.

    Args:
        module: A module on a CUDA device (its tensors keep their addresses while training).
    """

    def __init__(self, module: nn.Module) -> None:
        state = module.state_dict()
        if not all(t.is_cuda for t in state.values()):
            raise ValueError("HostCopy is for a module on a CUDA device. Fix: on the CPU use "
                             "rlkit.core.networks.module_weights.")
        self.names = list(state)
        self.sources = [t.detach() for t in state.values()]
        self.host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in self.sources]
        self.event: torch.cuda.Event | None = None

    @property
    def in_flight(self) -> bool:
        return self.event is not None

    def start(self) -> None:
        """Queue the device-to-host copies behind the work already queued (no wait)."""
        if self.event is not None:
            raise RuntimeError("a copy is still in flight. Fix: take() it first.")
        for host, source in zip(self.host, self.sources):
            host.copy_(source, non_blocking=True)
        self.event = torch.cuda.Event()
        self.event.record()

    def ready(self) -> bool:
        """Whether the copy in flight has completed (never waits)."""
        return self.event is not None and self.event.query()

    def take(self) -> Weights:
        """The copied weights as numpy arrays of their own (waits if the copy is unfinished),
        freeing the buffers for the next :meth:`start`."""
        if self.event is None:
            raise RuntimeError("no copy in flight. Fix: call start() first.")
        self.event.synchronize()
        self.event = None
        return {name: host.numpy().copy() for name, host in zip(self.names, self.host)}
