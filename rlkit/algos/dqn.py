"""Deep Q-learning: config, exploration schedule, TD target, learner, and its algorithm spec.

The single-process trainer is :func:`rlkit.train.train_dqn`; the Ray one
:func:`rlkit.distributed.off_policy.driver.train_dqn_ray`. Both run :class:`DQNSpec` through a
loop written once for every off-policy algorithm. The TD arithmetic (targets, loss, the TD
errors Ape-X actors use as priorities) lives in :mod:`rlkit.algos.dqn_td` and is re-exported here.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.algos.dqn_td import (DQNPriorityModel, dqn_loss, dqn_q_and_targets,  # noqa: F401
                                dqn_targets, dqn_td_errors)
from rlkit.algos.prioritized_td import (AnyBatch, importance_weights_tensor, prefixed_weights,
                                        td_tensors)
from rlkit.core.common import polyak_update, role_seed
from rlkit.core.gradients import GradientSync, gradient_step, no_sync
from rlkit.core.networks import (QNetwork, load_numpy_weights, load_optimizer_state, make_adam,
                                 module_weights)
from rlkit.core.spaces import ObsSpec, obs_spec
from rlkit.core.types import Batch, BatchPolicy, NStepBatch, Weights
from rlkit.core.validation import SEED_MAX, fail, flag, integer, layers, number, text
from rlkit.core.workers import WorkerShape
from rlkit.envs.make import ActionKind, check_env_id, space_dims
from rlkit.replay.buffers import ReplayBuffer, require_replay_settings


@dataclass(frozen=True)
class DQNConfig(WorkerShape):
    """Settings of a DQN run. Invalid values raise ``ValueError`` naming the field and the fix.

    The defaults are the tuned CartPole-v1 settings of notebook 01 (see its section 8). The
    network size and the evaluation cadence come from the lever study over seeds 0-4
    (``python -m benchmarks.levers``, ``benchmarks/results/levers_dqn.json``).
    """

    env_id: str = text("CartPole-v1")
    seed: int = integer(0, 0, SEED_MAX)
    total_steps: int = integer(100_000, 1)  # env-step budget; training stops earlier once solved
    buffer_size: int = integer(100_000, 1)
    batch_size: int = integer(64, 1)
    learning_rate: float = number(2.3e-3, above=0)
    gamma: float = number(0.99, at_least=0, below=1)
    learning_starts: int = integer(1_000)  # env steps collected before the first update
    train_every: int = integer(2, 1)  # env steps per gradient update (update-to-data ratio 1/2)
    target_update_every: int = integer(128, 1)  # gradient updates between target syncs
    tau: float = number(1.0, above=0, at_most=1)  # 1.0 = hard copy; < 1 = Polyak averaging
    epsilon_start: float = number(1.0, at_least=0, at_most=1, meaning="a probability")
    epsilon_end: float = number(0.04, at_least=0, at_most=1, meaning="a probability")
    epsilon_decay_steps: int = integer(8_000)
    double_dqn: bool = flag(True)
    n_step: int = integer(1, 1)  # steps of reward in each TD target (rlkit.replay.nstep)
    huber: bool = flag(True)  # Huber (smooth L1) loss; False = mean squared error
    max_grad_norm: float = number(10.0, above=0, finite=False)  # math.inf: no clipping
    hidden: tuple[int, ...] = layers((128, 128))  # as robust as 256x256 over seeds 0-4
    eval_every: int = integer(2_500, 1)  # env steps between greedy evaluations (~0.1 s each)
    eval_episodes: int = integer(20, 1)
    target_return: float | None = number(475.0, optional=True)  # stop once an eval reaches it
    torch_threads: int = integer(1, 1)

    def check(self) -> None:
        super().check()  # the worker shape
        check_env_id(self.env_id)
        require_replay_settings(self)
        if self.epsilon_end > self.epsilon_start:
            fail("epsilon_end", self.epsilon_end, f"is above epsilon_start={self.epsilon_start}",
                 "exploration should decay: make epsilon_end <= epsilon_start")


#: Breakout-MinAtar from its ``(4, 10, 10)`` frames (notebook 09, ``benchmarks/pixels.py``):
#: MinAtar's conv net (chosen by the frames) under one hidden layer of 128, as the MinAtar
#: paper's DQN; replay of 100k; exploration decaying over 25k env steps (the paper: 100k);
#: Adam at 1e-3, an update every 2 env steps on batches of 64, 3-step targets, the target
#: network copied every 250 updates. Measured on a 2-core CPU while other work ran beside it
#: (seed 0, one run, 10-episode evaluations): a greedy mean of 5.4 at 20k env steps, 8.4 at 90k
#: (random play: 0.5).
BREAKOUT_MINATAR = DQNConfig(env_id="rlkit/BreakoutMinAtar-v0", hidden=(128,),
                             total_steps=1_000_000, buffer_size=100_000, batch_size=64,
                             learning_rate=1e-3, learning_starts=2_000, train_every=2,
                             target_update_every=250, epsilon_end=0.1,
                             epsilon_decay_steps=25_000, n_step=3, eval_every=10_000,
                             eval_episodes=20, target_return=None)


class DQNReport(NamedTuple):
    """What one DQN update reports: floats on the CPU; 0-d tensors left on a GPU (reading one
    would make the host wait for the device at every update)."""

    loss: Any  # the TD loss (Huber or squared), over the batch
    q_mean: Any  # the mean Q(s, a) of the batch's actions
    grad_norm: Any  # the gradient's norm before clipping


def linear_epsilon(step: int, start: float, end: float, decay_steps: int) -> float:
    """Exploration rate after ``step`` env steps: ``start`` falling linearly to ``end``.

    It reaches ``end`` at ``decay_steps`` and stays there (``decay_steps=0`` means ``end`` at once).
    """
    if decay_steps <= 0 or step >= decay_steps:
        return end
    return start + (end - start) * step / decay_steps


class DQNLearner:
    """Holds the online and target Q-networks and the optimiser; one ``update`` per batch.

    Args:
        obs_dim: Observation size, or an :class:`~rlkit.core.spaces.ObsSpec` (frames: the
            Q-network gets a conv encoder).
        n_actions: Number of discrete actions.
        config: The run's :class:`DQNConfig`.
        device: Torch device for the networks and updates.
    """

    def __init__(self, obs_dim: int | ObsSpec, n_actions: int, config: DQNConfig,
                 device: str | torch.device = "cpu") -> None:
        self.config = config
        self.device = torch.device(device)
        self.q = QNetwork(obs_dim, n_actions, config.hidden).to(self.device)
        self.q_target = copy.deepcopy(self.q)  # starts equal to the online network
        self.q_target.requires_grad_(False)
        self.optimizer = make_adam(self.q.parameters(), config.learning_rate)
        self.updates = 0
        self.sync_gradients: GradientSync = no_sync  # average_gradients in a group
        self._td_errors = torch.zeros(0)  # the last update's (B,) TD errors

    def update(self, batch: Batch | NStepBatch, importance_weights: torch.Tensor | None = None
               ) -> DQNReport:
        """One gradient step on ``batch``; syncs the target net every ``target_update_every``.

        Args:
            batch: ``B`` transitions: a one-step ``Batch`` bootstraps with ``config.gamma``, an
                ``NStepBatch`` with its own ``discounts``.
            importance_weights: ``(B,)`` prioritized replay's ``w_i`` (see
                :meth:`update_prioritized`); ``None``: the plain mean loss.

        Returns:
            A :class:`DQNReport`: floats on the CPU; on a GPU, 0-d tensors left on the
            device, because reading one (``.item()``) makes the host wait for the GPU at every
            update. Callers read their mean once per batch of updates, as SAC's do
            (:meth:`rlkit.distributed.off_policy.roles.OffPolicyLearner.add_and_train`).

        Raises:
            FloatingPointError: on the CPU, if the loss is not finite (the weights are left
                unchanged). On a GPU the check moves to the caller's once-per-batch read of
                the mean loss, which raises the same error.
        """
        cfg = self.config
        tensors = td_tensors(batch, cfg.gamma, self.device)
        q_taken, targets = dqn_q_and_targets(self.q, self.q_target, tensors, cfg.double_dqn)
        self._td_errors = targets - q_taken.detach()  # (B,), before the step: new priorities
        loss = dqn_loss(q_taken, targets, cfg.huber, importance_weights)
        on_host = self.device.type == "cpu"  # reading a CPU tensor costs no device sync
        if on_host and not math.isfinite(loss_value := float(loss.item())):
            raise FloatingPointError(
                f"DQN loss became {loss_value} at update {self.updates} "
                f"(q_mean={float(q_taken.detach().mean()):.3g}, largest |reward| in the batch "
                f"{float(tensors.rewards.abs().max()):.3g}). Fix: rewards that large (or not "
                f"finite) must be scaled down (or cleaned) first; else lower learning_rate.")
        grad_norm = gradient_step(self.optimizer, loss, self.q.parameters(), self.sync_gradients,
                                  cfg.max_grad_norm)
        self.updates += 1
        if self.updates % cfg.target_update_every == 0:
            self.sync_target()
        report = DQNReport(loss.detach(), q_taken.detach().mean(), grad_norm.detach())
        return DQNReport(*(float(v) for v in report)) if on_host else report

    def update_prioritized(self, batch: AnyBatch, importance_weights: np.ndarray
                           ) -> tuple[DQNReport, np.ndarray]:
        """Ape-X's update (:class:`~rlkit.algos.apex.PrioritizedLearner`): :meth:`update` on
        ``mean_i(w_i * loss_i)``; the TD errors are ``|target - Q(s, a)|``, the numbers
        :func:`dqn_td_errors` gives."""
        weights = importance_weights_tensor(importance_weights, len(batch), self.device)
        return self.update(batch, weights), self._td_errors.abs().cpu().numpy()

    @torch.no_grad()
    def sync_target(self) -> None:
        """``target <- tau * online + (1 - tau) * target`` (a plain copy when ``tau == 1``)."""
        if self.config.tau < 1.0:
            polyak_update(self.q_target, self.q, self.config.tau)
            return
        for p_t, p in zip(self.q_target.parameters(), self.q.parameters(), strict=True):
            p_t.copy_(p)

    def get_weights(self) -> Weights:
        """The online network's weights as numpy arrays (cheap to ship between processes)."""
        return module_weights(self.q)

    def get_priority_weights(self) -> Weights:
        """Online and target weights in one dict (keys ``q.*`` and ``q_target.*``): what an
        Ape-X actor loads into its :class:`DQNPriorityModel`."""
        return prefixed_weights({"q": self.q, "q_target": self.q_target})

    def state_dict(self) -> dict[str, Any]:
        """Networks, optimiser and update count: everything needed to continue training."""
        return {"q": self.q.state_dict(), "q_target": self.q_target.state_dict(),
                "optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (tensors may be on any device)."""
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        load_optimizer_state(self.optimizer, state["optimizer"])
        self.updates = int(state["updates"])

    def set_weights(self, weights: Weights) -> None:
        """Load online weights and copy them into the target network too."""
        load_numpy_weights(self.q, weights)
        self.q_target.load_state_dict(self.q.state_dict())


def epsilon_greedy_policy(q: QNetwork, n_actions: int, rng: np.random.Generator,
                          epsilon: Callable[[], float]) -> BatchPolicy:
    """A batched policy: for each of ``N`` observations, a random action with probability
    ``epsilon()``, else the greedy one.

    Args:
        q: Q-network used for the greedy choice.
        n_actions: Number of actions.
        rng: Source of the exploration randomness.
        epsilon: Called once per call for the current exploration rate.

    Returns:
        A function ``(N, *obs_shape)`` observations (as the runner keeps them) -> ``(N,)``
        int64 actions. The forward pass is skipped when every action is random.
    """

    def act(obs: np.ndarray) -> np.ndarray:
        n = len(obs)
        explore = rng.random(n) < epsilon()
        actions = rng.integers(n_actions, size=n)
        if not explore.all():
            with torch.inference_mode():
                greedy = q(torch.as_tensor(obs)).argmax(dim=1).numpy()
            actions = np.where(explore, actions, greedy)
        return actions

    return act


def greedy_batch_policy(q: QNetwork) -> BatchPolicy:
    """``(N, *obs_shape)`` observations -> ``(N,)`` greedy actions, for
    :func:`evaluate_policy`."""

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return q(torch.as_tensor(obs)).argmax(dim=1).numpy()

    return act


class DQNSpec:
    """DQN as an :class:`rlkit.core.types.OffPolicyAlgorithm`: behaviour is epsilon-greedy with a
    Q-network, and a numpy replay buffer feeds the learner. It takes vectors and images: the
    Q-network's encoder and the buffer's rows follow the env's observation space."""

    name = "DQN"
    action_kind: ActionKind = "discrete"
    images = True

    def __init__(self, config: DQNConfig) -> None:
        self.config = config

    def random_action_prob(self, env_steps: int) -> float:
        """Epsilon after ``env_steps`` env steps of the whole system."""
        c = self.config
        return linear_epsilon(env_steps, c.epsilon_start, c.epsilon_end, c.epsilon_decay_steps)

    def make_policy_network(self, env: gym.Env) -> nn.Module:
        return QNetwork(obs_spec(env.observation_space), space_dims(env)[1], self.config.hidden)

    def exploration_policy(self, net: nn.Module, env: gym.Env, rng: np.random.Generator,
                           random_action_prob: Callable[[], float]) -> BatchPolicy:
        return epsilon_greedy_policy(net, space_dims(env)[1], rng, random_action_prob)

    def evaluation_policy(self, net: nn.Module) -> BatchPolicy:
        return greedy_batch_policy(net)

    @staticmethod
    def policy_network_of(learner: DQNLearner) -> nn.Module:
        """The learner's network that acts (a single process acts with it directly)."""
        return learner.q

    def make_learner(self, env: gym.Env, device: torch.device) -> DQNLearner:
        return DQNLearner(obs_spec(env.observation_space), space_dims(env)[1], self.config,
                          device)

    def make_buffer(self, env: gym.Env, device: torch.device) -> ReplayBuffer:
        return ReplayBuffer(self.config.buffer_size, obs_spec(env.observation_space), None,
                            seed=role_seed(self.config.seed, "replay"),
                            n_step=self.config.n_step > 1)

