"""SAC's whole update as one CUDA graph, replayed once per update (GPU only).

On a GPU, the eager SAC update is bound by kernel launches, not arithmetic: about 300 small
kernels, each launched by Python, for about 1 ms of GPU work. A CUDA graph records those
kernels once and replays them with one call, so the host cost per update almost vanishes.
Everything the update needs must then live at fixed addresses on the device:

* the replay buffer's storage (``TensorReplayBuffer`` allocates it once) and its fill level,
  held here as a device tensor refreshed before each replay, not a Python int baked in;
* the batch indices, drawn inside the graph from the default CUDA generator (PyTorch
  registers it with every graph, so each replay draws fresh numbers), or copied in by the
  caller (``indices=``) to replay exactly the batches an eager run used;
* the optimisers' state: the learner's Adam optimisers are built with ``capturable=True``
  (their step counters live on the device) and warmed up before capture;
* the temperature ``alpha = exp(log_alpha)``, recomputed inside the graph from the parameter;
* the metrics: summed on the device by the graph and read once per batch of updates
  (:meth:`SACGraphUpdate.take_sums`), which is also where a NaN is detected.

Capturing runs a few real updates first (the warm-up that allocates gradients and optimiser
state); this module saves the learner's weights and optimiser state before them and restores
them after the capture, so building a graph never changes the learner. Loading a checkpoint
replaces the optimisers' state tensors: call :meth:`SACGraphUpdate.invalidate` and the graph is
captured again at the next replay. The eager :meth:`rlkit.algos.sac.SACLearner.update` stays
the CPU path and the reference; a GPU test checks that replays and eager updates give the same
weights from the same state and indices.

Written without access to a GPU (the CI machine has none): the tests that exercise it run
wherever CUDA exists and are skipped elsewhere.
"""

from __future__ import annotations

import torch

from rlkit.algos.sac import SACReport
from rlkit.core.types import TensorBatch
from rlkit.replay.buffers import TensorReplayBuffer

#: The order of :meth:`SACGraphUpdate.take_sums`'s entries: a :class:`SACReport`'s.
METRICS = SACReport._fields


class SACGraphUpdate:
    """Replays one captured SAC update (sample, three losses and steps, Polyak) per call.

    Args:
        learner: A :class:`rlkit.algos.sac.SACLearner` on a CUDA device whose optimisers were
            built with ``capturable=True`` (``SACConfig(cuda_graph=True)`` does that).
        buffer: The :class:`TensorReplayBuffer` on the same device that the updates sample.
        batch_size: Transitions per update.
        warmup: Eager updates run (and then undone) before capture.
    """

    def __init__(self, learner, buffer: TensorReplayBuffer, batch_size: int,
                 warmup: int = 3) -> None:
        device = learner.device
        if not isinstance(buffer, TensorReplayBuffer):
            raise ValueError(f"a CUDA graph samples a TensorReplayBuffer on the learner's device, "
                             f"not a {type(buffer).__name__}. Fix: use host_buffer=False, or the "
                             "eager update (cuda_graph=False).")
        if device.type != "cuda" or buffer.device != device:
            raise ValueError(f"a CUDA graph needs the learner and its buffer on one CUDA device "
                             f"(learner on {device}, buffer on {buffer.device}). Fix: use the "
                             "eager update (cuda_graph=False) on the CPU.")
        _require_capturable(learner)
        self.learner, self.buffer = learner, buffer
        self.batch_size, self.warmup = batch_size, warmup
        # the buffer's size as a float64 on the device: rand * fill stays below fill (float32
        # would round up to it, one row past the end, once fill passes 2**24 rows)
        self.fill = torch.ones((), dtype=torch.float64, device=device)
        self.indices = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.sums = torch.zeros(len(METRICS), device=device)
        self.replays_since_read = 0
        self.draw_indices = True
        self.graph: torch.cuda.CUDAGraph | None = None

    def invalidate(self) -> None:
        """Forget the graph (after a checkpoint load replaced the optimisers' state)."""
        self.graph = None

    def _update(self) -> None:
        """One update on device-resident data: what the graph records."""
        b = self.buffer
        if self.draw_indices:
            drawn = torch.rand(self.batch_size, dtype=torch.float64, device=self.fill.device)
            drawn = drawn * self.fill
            self.indices.copy_(drawn.long())
        idx = self.indices
        batch = TensorBatch(b.obs.index_select(0, idx), b.actions.index_select(0, idx),
                            b.rewards.index_select(0, idx), b.next_obs.index_select(0, idx),
                            b.terminations.index_select(0, idx))
        report = self.learner.update(batch)
        self.sums += torch.stack([value.reshape(()) for value in report])

    def capture(self, draw_indices: bool = True) -> None:
        """Record the update now (the first :meth:`replay` does it otherwise): a few eager
        updates warm up the optimisers, one is recorded, and the learner's weights and
        optimiser state are put back as they were. ``draw_indices``: draw the batch inside the
        graph (``True``) or read it from the ``indices`` that :meth:`replay` is given."""
        self.draw_indices = draw_indices
        self.fill.fill_(float(max(len(self.buffer), 1)))
        learner = self.learner
        _require_capturable(learner)  # again: a checkpoint load may have replaced the settings
        saved = _snapshot(learner)
        updates = learner.updates
        try:
            side = torch.cuda.Stream(self.fill.device)
            side.wait_stream(torch.cuda.current_stream(self.fill.device))
            with torch.cuda.stream(side):
                for _ in range(self.warmup):
                    self._update()
            torch.cuda.current_stream(self.fill.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._update()
        finally:  # captured or not, the learner is left as it was
            _restore(learner, saved)
            learner.updates = updates
        self.sums.zero_()
        self.replays_since_read = 0
        self.graph = graph

    def replay(self, indices: torch.Tensor | None = None) -> None:
        """One SAC update. ``indices``: ``(batch_size,)`` buffer rows to train on (for tests
        that replay an eager run's batches); ``None``: drawn uniformly on the device."""
        if len(self.buffer) == 0:
            raise ValueError("cannot train on an empty TensorReplayBuffer. Fix: add "
                             "transitions first (learning_starts must be >= the batch size).")
        draw = indices is None
        if self.graph is None or draw != self.draw_indices:
            self.capture(draw)
        self.fill.fill_(float(len(self.buffer)))  # a kernel launch, no host sync
        if not draw:
            self.indices.copy_(indices, non_blocking=True)
        self.graph.replay()
        self.learner.updates += 1
        self.replays_since_read += 1

    def take_sums(self) -> tuple[SACReport, int]:
        """The reports summed over the replays since the last call (one host sync), and their
        count; the sums restart from zero."""
        values = self.sums.tolist()
        count = self.replays_since_read
        self.sums.zero_()
        self.replays_since_read = 0
        return SACReport(*values), count


def _optimizers(learner) -> list[torch.optim.Optimizer]:
    return [learner.actor_opt, learner.critic_opt, learner.alpha_opt]


def _require_capturable(learner) -> None:
    if not all(g.get("capturable", False) for opt in _optimizers(learner)
               for g in opt.param_groups):
        raise ValueError("the learner's Adam optimisers are not capturable. Fix: build the "
                         "learner with SACConfig(cuda_graph=True).")


def _tensors(learner) -> list[torch.Tensor]:
    """Every tensor an update writes: weights, targets, temperature."""
    return [*learner.actor.parameters(), *learner.critic.parameters(),
            *learner.critic_target.parameters(), learner.log_alpha]


def _snapshot(learner) -> tuple[list[torch.Tensor], list[dict[str, torch.Tensor] | None]]:
    weights = [t.detach().clone() for t in _tensors(learner)]
    states = []
    for opt in _optimizers(learner):
        for group in opt.param_groups:
            for p in group["params"]:
                state = opt.state.get(p)
                states.append({k: v.clone() for k, v in state.items()
                               if torch.is_tensor(v)} if state else None)
    return weights, states


@torch.no_grad()
def _restore(learner, saved) -> None:
    """Copy a snapshot back in place (addresses unchanged, so the graph stays valid); an
    optimiser state that did not exist before the warm-up goes back to zero, which for Adam
    is exactly "no step taken yet"."""
    weights, states = saved
    for t, v in zip(_tensors(learner), weights, strict=True):
        t.copy_(v)
    i = 0
    for opt in _optimizers(learner):
        for group in opt.param_groups:
            for p in group["params"]:
                for k, v in opt.state.get(p, {}).items():
                    if not torch.is_tensor(v):
                        continue
                    if states[i] is None:
                        v.zero_()
                    else:
                        v.copy_(states[i][k])
                i += 1
