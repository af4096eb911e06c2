"""``core/gradients.py`` by hand: every learner's step (clear, backward, sync, clip, step) on a
one-weight model whose gradient is known."""

import torch

from rlkit.core.gradients import gradient_step, no_sync


def _model_and_loss(w0: float = 1.0):
    w = torch.nn.Parameter(torch.tensor([w0]))
    loss = ((3.0 * w - 0.0) ** 2).sum()  # d/dw = 18 w: 18 at w = 1
    return w, loss


def test_a_step_without_a_clip_is_plain_sgd_and_returns_no_norm():
    w, loss = _model_and_loss()
    w.grad = torch.tensor([100.0])  # a stale gradient the step must clear first
    opt = torch.optim.SGD([w], lr=0.01)
    assert gradient_step(opt, loss, [w], no_sync) is None
    assert torch.allclose(w.detach(), torch.tensor([1.0 - 0.01 * 18.0]))


def test_the_sync_comes_before_the_clip_and_the_norm_is_the_synced_one():
    """A group's all-reduce stands in as a sync that halves the gradient: the norm returned is
    the halved one (9), and the clip to 1 applies to it."""
    order = []

    def halve(parameters):
        order.append("sync")
        for p in parameters:
            p.grad /= 2

    w, loss = _model_and_loss()
    opt = torch.optim.SGD([w], lr=0.1)
    norm = gradient_step(opt, loss, iter([w]), halve, max_grad_norm=1.0)  # a generator, too
    assert order == ["sync"] and abs(float(norm) - 9.0) < 1e-5
    assert torch.allclose(w.detach(), torch.tensor([1.0 - 0.1 * 1.0]), atol=1e-6)
