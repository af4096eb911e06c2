"""Soft Actor-Critic: config, the three losses, the learner, and its algorithm spec.

The single-process trainer is :func:`rlkit.train.train_sac`; the Ray one
:func:`rlkit.distributed.off_policy.driver.train_sac_ray`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.algos.actor_specs import ActorCriticSpec
from rlkit.algos.continuous_learner import ContinuousLearner, with_uniform_warmup
from rlkit.core.common import bootstrap_target, polyak_update
from rlkit.core.gradients import gradient_step
from rlkit.core.networks import SquashedGaussianActor, TwinQ, make_adam
from rlkit.core.types import BatchPolicy, TensorBatch
from rlkit.core.validation import SEED_MAX, flag, integer, layers, number, text
from rlkit.core.workers import WorkerShape
from rlkit.envs.make import check_env_id, space_dims
from rlkit.replay.buffers import require_replay_settings


@dataclass(frozen=True)
class SACConfig(WorkerShape):
    """Settings of a SAC run. Invalid values raise ``ValueError`` naming the field and the fix.

    The defaults are notebook 03's Pendulum-v1 settings. The learning rates and the evaluation
    cadence come from the lever study over seeds 0-4 (``python -m benchmarks.levers --algo sac``,
    ``benchmarks/results/levers_sac.json``).
    """

    env_id: str = text("Pendulum-v1")
    seed: int = integer(0, 0, SEED_MAX)
    total_steps: int = integer(20_000, 1)  # env-step budget; training stops earlier once solved
    buffer_size: int = integer(100_000, 1)
    batch_size: int = integer(128, 1)
    actor_lr: float = number(3e-3, above=0)  # 3e-3 solved every seed at 4k steps; 1e-3: 4k-5k
    critic_lr: float = number(3e-3, above=0)
    alpha_lr: float = number(3e-3, above=0)
    gamma: float = number(0.99, at_least=0, below=1)
    tau: float = number(0.005, above=0, at_most=1)  # Polyak step of the target critics
    learning_starts: int = integer(1_000)  # uniform-random steps for the whole system first
    train_every: int = integer(1, 1)  # env steps per gradient update (update-to-data ratio 1)
    init_alpha: float = number(1.0, above=0)  # initial entropy temperature
    hidden: tuple[int, ...] = layers((128, 128))  # (256, 256) with batch 256 is the GPU size
    eval_every: int = integer(1_000, 1)  # a 10-episode evaluation costs ~0.05 s: check often
    eval_episodes: int = integer(10, 1)
    target_return: float | None = number(-200.0, optional=True)  # stop once an eval reaches it
    torch_threads: int = integer(1, 1)
    compile_losses: bool = flag(False)  # torch.compile the critic and actor losses (make bench)
    cuda_graph: bool = flag(False)  # a CUDA learner replays its update as one CUDA graph

    def check(self) -> None:
        super().check()  # the worker shape
        check_env_id(self.env_id)
        require_replay_settings(self)


#: LunarLanderContinuous-v3, the seed article's task (``benchmarks/lunar.py``, notebook 03's
#: last section): RL Baselines3 Zoo's SAC settings for it (batch 256, learning rate 7.3e-4, a 1M
#: replay, tau 0.01, 10k random steps first), with a constant learning rate (the Zoo decays it
#: over 500k steps) and 256x256 networks (the SAC paper's; the Zoo's 400x300 cost about twice as
#: much per update on a CPU). Solved: a 10-episode deterministic mean of at least 200.
LUNAR_LANDER = SACConfig(env_id="LunarLanderContinuous-v3", total_steps=300_000,
                         buffer_size=1_000_000, batch_size=256, actor_lr=7.3e-4,
                         critic_lr=7.3e-4, alpha_lr=7.3e-4, gamma=0.99, tau=0.01,
                         learning_starts=10_000, train_every=1, hidden=(256, 256),
                         eval_every=5_000, eval_episodes=10, target_return=200.0)


def sac_critic_target(rewards: torch.Tensor, terminations: torch.Tensor,
                      next_q1: torch.Tensor, next_q2: torch.Tensor,
                      next_log_prob: torch.Tensor, alpha: torch.Tensor | float,
                      gamma: float) -> torch.Tensor:
    """Soft TD target ``r + gamma (1 - term) (min(Q1', Q2') - alpha log pi(a'|s'))``.

    All inputs ``(B,)`` (alpha a scalar); ``a'`` was sampled from the current policy at ``s'``.
    As in DQN, a time-limit truncation has ``term = 0`` and bootstraps.
    """
    soft_value = torch.min(next_q1, next_q2) - alpha * next_log_prob
    return bootstrap_target(rewards, terminations, soft_value, gamma)


def sac_critic_loss(critic: TwinQ, critic_target: TwinQ, actor: SquashedGaussianActor,
                    batch: TensorBatch, alpha: torch.Tensor, gamma: float) -> torch.Tensor:
    """Mean squared error of both critics against the soft target (no gradient through it)."""
    with torch.no_grad():
        next_actions, next_log_prob = actor(batch.next_obs)
        next_q1, next_q2 = critic_target(batch.next_obs, next_actions)
        target = sac_critic_target(batch.rewards, batch.terminations, next_q1, next_q2,
                                   next_log_prob, alpha, gamma)
    q1, q2 = critic(batch.obs, batch.actions)
    return ((q1 - target) ** 2).mean() + ((q2 - target) ** 2).mean()


def sac_actor_loss(actor: SquashedGaussianActor, critic: TwinQ, obs: torch.Tensor,
                   alpha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``E[alpha log pi(a|s) - min(Q1, Q2)(s, a)]`` with ``a`` reparameterised from ``pi``.

    Returns:
        ``(loss, log_prob (B,))``; ``log_prob`` feeds the temperature loss.
    """
    actions, log_prob = actor(obs)
    q1, q2 = critic(obs, actions)
    return (alpha * log_prob - torch.min(q1, q2)).mean(), log_prob


def sac_alpha_loss(log_alpha: torch.Tensor, log_prob: torch.Tensor,
                   target_entropy: float) -> torch.Tensor:
    """``-log_alpha * (log pi + target_entropy)``: raises alpha when the policy's entropy
    ``-log pi`` is below the target, lowers it when above."""
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


class SACReport(NamedTuple):
    """What one SAC update reports: detached scalar tensors left on the learner's device."""

    critic_loss: Any
    actor_loss: Any
    alpha_loss: Any
    alpha: Any  # the temperature the update used
    entropy: Any  # -mean log pi(a|s) of the actor's fresh actions

    @property
    def loss(self) -> Any:
        """The loss the loops log: the critics'."""
        return self.critic_loss


class SACLearner(ContinuousLearner):
    """Actor, twin critics with Polyak-averaged targets, and a learned temperature
    (:class:`~rlkit.algos.continuous_learner.ContinuousLearner`'s, plus the temperature).

    Args:
        obs_dim, act_dim: Sizes.
        action_low, action_high: The action box, ``(act_dim,)`` each.
        config: The run's :class:`SACConfig`.
        device: Where the networks and updates live.
    """

    def __init__(self, obs_dim: int, act_dim: int, action_low: np.ndarray,
                 action_high: np.ndarray, config: SACConfig,
                 device: str | torch.device = "cpu") -> None:
        graph = config.cuda_graph and torch.device(device).type == "cuda"  # the CPU: eager
        super().__init__(SquashedGaussianActor(obs_dim, act_dim, config.hidden, action_low,
                                               action_high),
                         TwinQ(obs_dim, act_dim, config.hidden), config, device, graph)
        self.log_alpha = torch.tensor([math.log(config.init_alpha)], device=self.device,
                                      requires_grad=True)
        self.target_entropy = -float(act_dim)
        self.alpha_opt = make_adam([self.log_alpha], config.alpha_lr, graph)
        self.freeze_critics_in_actor_step = True  # False only to measure what it saves
        # torch.compile fuses each loss's small ops; the first updates pay the compilation
        # (about 20 s on a 2-core CPU), so it pays off only in long runs: see `make bench`
        self._critic_loss_fn = torch.compile(sac_critic_loss) if config.compile_losses \
            else sac_critic_loss
        self._actor_loss_fn = torch.compile(sac_actor_loss) if config.compile_losses \
            else sac_actor_loss

    def update(self, batch: TensorBatch) -> SACReport:
        """One step of each loss on ``batch`` (tensors on ``self.device``).

        Returns:
            A :class:`SACReport` of detached scalar tensors. They stay on the device: reading
            them (``.item()``) would make the host wait for the GPU, so callers read them once
            per many updates.
        """
        alpha = self.log_alpha.detach().exp()
        critic_loss = self._critic_loss_fn(self.critic, self.critic_target, self.actor, batch,
                                           alpha, self.config.gamma)
        gradient_step(self.critic_opt, critic_loss, self.critic.parameters(), self.sync_gradients)

        # The actor's loss goes through the critics, but only the actor learns from it: with
        # the critics frozen, backward computes no gradients for their weights (gradients the
        # critic optimiser would only throw away at its next zero_grad).
        self.critic.requires_grad_(not self.freeze_critics_in_actor_step)
        actor_loss, log_prob = self._actor_loss_fn(self.actor, self.critic, batch.obs, alpha)
        gradient_step(self.actor_opt, actor_loss, self.actor.parameters(), self.sync_gradients)
        self.critic.requires_grad_(True)

        alpha_loss = sac_alpha_loss(self.log_alpha, log_prob, self.target_entropy)
        gradient_step(self.alpha_opt, alpha_loss, [self.log_alpha], self.sync_gradients)

        polyak_update(self.critic_target, self.critic, self.config.tau)
        self.updates += 1
        return SACReport(critic_loss.detach(), actor_loss.detach(), alpha_loss.detach(),
                         alpha.squeeze(0), -log_prob.detach().mean())

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {**super().optimizers(), "alpha_opt": self.alpha_opt}

    def state_dict(self) -> dict[str, Any]:
        """:class:`ContinuousLearner`'s, with the temperature."""
        return {**super().state_dict(), "log_alpha": self.log_alpha.detach().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])


def sac_exploration_policy(actor: SquashedGaussianActor, rng: np.random.Generator,
                           low: np.ndarray, high: np.ndarray,
                           random_prob: Callable[[], float]) -> BatchPolicy:
    """Batched behaviour policy: uniform-random actions with probability ``random_prob()``
    (1 during the warm-up, 0 after), else a sample from the actor. ``(N, obs_dim)`` ->
    ``(N, act_dim)`` float32."""

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return actor(torch.as_tensor(obs, dtype=torch.float32))[0].numpy()

    return with_uniform_warmup(act, rng, low, high, random_prob)


class SACSpec(ActorCriticSpec):
    """SAC as an :class:`rlkit.core.types.OffPolicyAlgorithm`: behaviour samples from the
    squashed-Gaussian actor (uniform-random during the warm-up); the rest is
    :class:`~rlkit.algos.actor_specs.ActorCriticSpec`'s."""

    name = "SAC"
    learner_class = SACLearner

    def make_policy_network(self, env: gym.Env) -> nn.Module:
        obs_dim, act_dim = space_dims(env)
        space = env.action_space
        return SquashedGaussianActor(obs_dim, act_dim, self.config.hidden, space.low, space.high)

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           random_action_prob: Callable[[], float]) -> BatchPolicy:
        space = env.action_space
        return sac_exploration_policy(net, rng, space.low, space.high, random_action_prob)
