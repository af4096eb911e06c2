"""Weights copied from the GPU to pinned host buffers: complete versions only, no device sync
per publication. The GPU cases run where CUDA exists; the CPU checks the refusal."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import cuda
from rlkit.core.networks import module_weights
from rlkit.distributed.runtime.host_copy import HostCopy


def test_a_cpu_module_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="CUDA device. Fix: on the CPU use"):
        HostCopy(torch.nn.Linear(3, 2))


@cuda
def test_a_copy_holds_the_weights_of_the_moment_it_was_started():
    net = torch.nn.Linear(256, 256).cuda()
    copy = HostCopy(net)
    expected = module_weights(net)
    copy.start()
    with torch.no_grad():  # queued after the copy: must not leak into it
        for _ in range(20):
            net.weight.add_(1.0)
    got = copy.take()
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])
    with pytest.raises(RuntimeError, match="no copy in flight"):
        copy.take()


@cuda
def test_take_waits_for_a_copy_still_queued_behind_gpu_work():
    net = torch.nn.Linear(256, 256).cuda()
    expected = module_weights(net)
    copy = HostCopy(net)
    torch.cuda._sleep(1 << 30)  # the GPU spins for a while (about a second): the copy waits
    copy.start()
    assert not copy.ready()  # still queued: reading the buffers now would read a half copy
    got = copy.take()  # ... so take() must wait for it
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


@cuda
def test_the_learner_publishes_complete_versions_without_waiting_per_update():
    from rlkit.algos.sac import SACConfig, SACSpec
    from rlkit.core.types import Batch
    from rlkit.distributed.off_policy.roles import OffPolicyLearner
    from rlkit.distributed.runtime.parameter_server import LocalChannel, ParameterServer

    ps = ParameterServer()
    cfg = SACConfig(hidden=(64, 64), batch_size=64, learning_starts=64)
    learner = OffPolicyLearner(SACSpec(cfg), LocalChannel(ps), publish_every=2, device="cuda")
    assert learner.host_copy is not None
    rng = np.random.default_rng(0)
    n = 512
    batch = Batch(rng.normal(size=(n, 3)).astype(np.float32),
                  rng.uniform(-2, 2, (n, 1)).astype(np.float32), rng.normal(size=n).astype(
                      np.float32), rng.normal(size=(n, 3)).astype(np.float32),
                  np.zeros(n, np.float32))
    learner.add_and_train(batch, num_updates=10)
    assert ps.version == 5  # every 2 updates, each one sent once its copy completed
    final = learner.get_weights()  # after 10 updates: the last version must equal it exactly
    for name, value in ps.payload.items():
        np.testing.assert_array_equal(value, final[name])
