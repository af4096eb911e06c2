"""Small neural networks: an MLP builder, DQN's Q-network (over any observation), SAC's actor
and twin critics, DDPG's deterministic actor and critic."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlkit.core.encoders import Flat, make_encoder
from rlkit.core.spaces import ObsSpec


def mlp(in_dim: int, out_dim: int, hidden: Sequence[int], activation: type[nn.Module] = nn.ReLU
        ) -> nn.Sequential:
    """A fully connected network ``in_dim -> hidden... -> out_dim`` with no output activation.

    Args:
        in_dim: Input features.
        out_dim: Output features.
        hidden: Width of each hidden layer, e.g. ``(128, 128)``.
        activation: Activation class placed after every hidden layer.

    Returns:
        A module mapping ``(B, in_dim)`` to ``(B, out_dim)``.
    """
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), activation()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


def encoded_mlp(obs_dim: int | ObsSpec, out_dim: int, hidden: Sequence[int],
                activation: type[nn.Module] = nn.ReLU) -> nn.Module:
    """:func:`mlp` over a vector (exactly it: the same parameters from the same seed), or over
    an image's features: ``Sequential(encoder, mlp)``, the encoder chosen by
    :func:`rlkit.core.encoders.make_encoder`. Maps ``(B, *obs_shape)`` to ``(B, out_dim)``."""
    encoder = make_encoder(obs_dim)
    if isinstance(encoder, Flat):
        return mlp(encoder.out_features, out_dim, hidden, activation)
    return nn.Sequential(encoder, mlp(encoder.out_features, out_dim, hidden, activation))


def actor_and_critic(obs_dim: int | ObsSpec, actor_out: int, hidden: Sequence[int],
                     shared_encoder: bool = False, activation: type[nn.Module] = nn.Tanh
                     ) -> tuple[nn.Module, nn.Module]:
    """An actor-critic's two networks over one observation: ``actor (B, *obs_shape) ->
    (B, actor_out)`` and ``critic (B, *obs_shape) -> (B, 1)``, each :func:`encoded_mlp`'s.

    ``shared_encoder=True`` (frames only) makes one encoder the first layer of both, under two
    MLP heads: the Atari actor-critic of the PPO and IMPALA papers. Its parameters are counted
    once by ``parameters()`` and trained by the policy's and the value's losses together, so
    the critic's regression on returns shapes the features the policy reads (a policy
    gradient alone is a weak signal for learning features from pixels), and a learner runs one
    conv net instead of two (:func:`actor_critic_forward`). A vector has no encoder to share:
    there the flag is refused, naming the fix.
    """
    if not shared_encoder:
        return (encoded_mlp(obs_dim, actor_out, hidden, activation),
                encoded_mlp(obs_dim, 1, hidden, activation))
    encoder = make_encoder(obs_dim)
    if isinstance(encoder, Flat):
        raise ValueError(f"shared_encoder=True, but the observation is a vector of "
                         f"{encoder.out_features} numbers, which has no encoder to share (the "
                         f"actor and the critic are two MLPs over it). Fix: leave "
                         f"shared_encoder=False for a vector observation.")
    return (nn.Sequential(encoder, mlp(encoder.out_features, actor_out, hidden, activation)),
            nn.Sequential(encoder, mlp(encoder.out_features, 1, hidden, activation)))


def actor_critic_forward(actor: nn.Module, critic: nn.Module, obs: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(actor(obs), critic(obs) (B,))`` from :func:`actor_and_critic`'s networks; a shared
    encoder's features are computed once for both heads."""
    if isinstance(actor, nn.Sequential) and isinstance(critic, nn.Sequential) \
            and actor[0] is critic[0]:
        features = actor[0](obs)
        return actor[1](features), critic[1](features).squeeze(-1)
    return actor(obs), critic(obs).squeeze(-1)


class QNetwork(nn.Module):
    """Maps an observation to one Q-value per discrete action: an encoder chosen by the
    observation (:func:`rlkit.core.encoders.make_encoder`: none for a vector, a conv net for
    frames), then an MLP head.

    Args:
        obs_dim: Size of a flat observation, or an :class:`~rlkit.core.spaces.ObsSpec` (an
            image's shape and dtype).
        n_actions: Number of discrete actions.
        hidden: The head's hidden layer widths.
    """

    def __init__(self, obs_dim: int | ObsSpec, n_actions: int,
                 hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        self.encoder = make_encoder(obs_dim)  # a vector's has no parameters
        self.obs_dim = self.encoder.out_features
        self.n_actions = n_actions
        self.net = mlp(self.encoder.out_features, n_actions, hidden)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim)`` float32 vectors, or ``(B, *shape)`` frames in any dtype ->
        ``(B, n_actions)`` Q-values."""
        return self.net(self.encoder(obs))

    @torch.no_grad()
    def greedy_actions(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, ...)`` observations -> ``(B,)`` int64 index of the largest Q-value."""
        return self.forward(obs).argmax(dim=1)


def make_adam(params: Any, lr: float, capturable: bool = False) -> torch.optim.Adam:
    """Adam with the fused kernel where this torch build supports it (faster for small MLPs).

    ``capturable=True`` keeps the step counters on the device, so the optimiser step can be
    recorded in a CUDA graph (:mod:`rlkit.algos.sac_graph`).
    """
    params = list(params)
    try:
        return torch.optim.Adam(params, lr=lr, fused=True, capturable=capturable)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr, capturable=capturable)


#: Optimiser settings that describe how *this* process runs its steps, not the training state.
RUNTIME_FLAGS = ("capturable", "fused", "foreach", "differentiable")


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)``, but keeping ``optimizer``'s own runtime flags.

    torch takes every group setting from the file, ``capturable`` and ``fused`` included, and
    places the step counters by those flags. A checkpoint written by a CPU run must be able to
    resume into a CUDA-graph learner (whose Adam has to stay ``capturable``), and the reverse,
    so the flags of the optimiser being loaded win.

    The state's tensors are copied: torch keeps a tensor already of the right device and dtype
    as it is, so loading a live optimiser's ``state_dict()`` would otherwise share its moments
    and step counts, and every step of one would move the other (seen on an H100: a CUDA-graph
    SAC learner loaded from an eager one diverged from it).
    """
    groups = [{**saved, **{k: own[k] for k in RUNTIME_FLAGS if k in own}}
              for saved, own in zip(state["param_groups"], optimizer.param_groups, strict=True)]
    moments = {i: {k: v.clone() if torch.is_tensor(v) else v for k, v in values.items()}
               for i, values in state["state"].items()}
    optimizer.load_state_dict({**state, "state": moments, "param_groups": groups})


def device_label(device: torch.device) -> str:
    """Where a learner runs, as results report it: ``"cpu"`` or ``"cuda: NVIDIA H100 ..."``."""
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return device.type


def module_weights(module: nn.Module) -> dict[str, np.ndarray]:
    """A module's ``state_dict`` as numpy arrays on the host: the form weights travel in
    between processes (Ray ships numpy arrays 2-6x faster than torch tensors)."""
    return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}


def load_numpy_weights(module: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Load a ``{name: numpy array}`` state dict (the form weights travel in between processes).

    Arrays fetched from Ray's object store are read-only views; ``torch.tensor`` copies them
    (a few hundred KB here) so torch never holds a tensor on memory it may not write.
    """
    module.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})


LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def register_action_box(module: nn.Module, action_low: np.ndarray,
                        action_high: np.ndarray) -> None:
    """Give ``module`` buffers ``scale = (high - low) / 2`` and ``bias = (high + low) / 2``
    ``(act_dim,)``, so ``bias + scale * tanh(x)`` maps ``(-1, 1)`` onto the action box (and the
    box moves with the module to its device). A box that is unbounded (or empty) on some
    dimension has no such map and is refused, naming the fix."""
    low_np, high_np = (np.asarray(action_low, dtype=np.float64),
                       np.asarray(action_high, dtype=np.float64))
    bad = ~(np.isfinite(low_np) & np.isfinite(high_np) & (high_np > low_np))
    if bad.any():
        raise ValueError(f"the action box low={low_np.tolist()}, high={high_np.tolist()} is "
                         f"unbounded or empty on dimension(s) {np.flatnonzero(bad).tolist()}, "
                         f"but {type(module).__name__} squashes its actions into the box "
                         f"(bias + scale * tanh) and explores uniformly inside it. Fix: wrap the "
                         f"env in gymnasium.wrappers.ClipAction or RescaleAction to finite "
                         f"bounds, or use PPO, whose Gaussian head needs no bounds.")
    low = torch.as_tensor(low_np, dtype=torch.float32)
    high = torch.as_tensor(high_np, dtype=torch.float32)
    module.register_buffer("scale", (high - low) / 2)
    module.register_buffer("bias", (high + low) / 2)


class BoxActor(nn.Module):
    """An MLP trunk whose outputs become actions in a box: the box's ``scale`` and ``bias``
    (:func:`register_action_box`) ride along as buffers. SAC's and DDPG's actors are two.

    Args:
        obs_dim: Observation size.
        act_dim: Action size.
        hidden: Hidden layer widths.
        action_low, action_high: The action box, ``(act_dim,)`` each.
        outputs_per_action: What the trunk gives per action dimension: 1 (the action) or 2
            (a mean and a log standard deviation).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int],
                 action_low: np.ndarray, action_high: np.ndarray,
                 outputs_per_action: int = 1) -> None:
        super().__init__()
        self.trunk = mlp(obs_dim, outputs_per_action * act_dim, hidden)
        register_action_box(self, action_low, action_high)


class SquashedGaussianActor(BoxActor):
    """SAC's policy: a Gaussian in an unbounded space, squashed by ``tanh`` into the action box
    (arguments as :class:`BoxActor`'s; the trunk gives a mean and a log std per dimension).

    ``u ~ N(mu(s), sigma(s))``, ``a = bias + scale * tanh(u)``. The log-density of ``a`` needs
    the change-of-variables correction
    ``log pi(a|s) = log N(u; mu, sigma) - sum_i log(scale_i * (1 - tanh(u_i)^2))``.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int],
                 action_low: np.ndarray, action_high: np.ndarray) -> None:
        super().__init__(obs_dim, act_dim, hidden, action_low, action_high, 2)

    def distribution_params(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, obs_dim)`` -> mean ``(B, act_dim)`` and log std ``(B, act_dim)`` (bounded)."""
        mean, log_std = self.trunk(obs).chunk(2, dim=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(log_std) + 1)
        return mean, log_std

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample with the reparameterisation trick.

        Returns:
            ``(actions (B, act_dim), log_prob (B,))``, differentiable in the parameters.
        """
        mean, log_std = self.distribution_params(obs)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        return self.squash(u, mean, log_std)

    def squash(self, u: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions and log-probabilities of pre-squash samples ``u`` ``(B, act_dim)``."""
        gaussian = (-0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std
                    - 0.5 * math.log(2 * math.pi)).sum(-1)
        # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)), stable for large |u|
        log_det = (2 * (math.log(2) - u - F.softplus(-2 * u)) + torch.log(self.scale)).sum(-1)
        return self.bias + self.scale * torch.tanh(u), gaussian - log_det

    @torch.no_grad()
    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The mean action ``bias + scale * tanh(mu(s))``, ``(B, act_dim)``, for evaluation."""
        return self.bias + self.scale * torch.tanh(self.distribution_params(obs)[0])


class TwinQ(nn.Module):
    """Two independent critics ``Q1, Q2: (s, a) -> R``; SAC uses their minimum.

    Args:
        obs_dim, act_dim: Sizes; each critic's input is ``[obs, action]``.
        hidden: Hidden layer widths of each critic.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.q1 = mlp(obs_dim + act_dim, 1, hidden)
        self.q2 = mlp(obs_dim + act_dim, 1, hidden)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B, obs_dim), (B, act_dim)`` -> ``(Q1 (B,), Q2 (B,))``."""
        x = torch.cat([obs, actions], dim=-1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


class DeterministicActor(BoxActor):
    """DDPG's policy ``mu(s) = bias + scale * tanh(f(s))``: one action per state, in the box
    (arguments as :class:`BoxActor`'s)."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim)`` -> ``(B, act_dim)`` actions, differentiable in the parameters."""
        return self.bias + self.scale * torch.tanh(self.trunk(obs))

    @torch.no_grad()
    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` without gradient (the name SAC's evaluation policy calls)."""
        return self.forward(obs)


class QCritic(nn.Module):
    """One critic ``Q: (s, a) -> R`` (DDPG's; SAC uses :class:`TwinQ`).

    Args:
        obs_dim, act_dim: Sizes; the input is ``[obs, action]``.
        hidden: Hidden layer widths.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.q = mlp(obs_dim + act_dim, 1, hidden)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``(B, obs_dim), (B, act_dim)`` -> ``(B,)`` Q-values."""
        return self.q(torch.cat([obs, actions], dim=-1)).squeeze(-1)
