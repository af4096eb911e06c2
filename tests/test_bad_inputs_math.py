"""The catalogue of hostile inputs to the math and the notebook helpers (V-trace, n-step
advantages, policy heads, plots, animations) and of settings that contradict each other or the
function they are given to: each is refused at once with an error that names the argument and
says ``Fix:``; the valid input next door still works. No Ray needed."""

from __future__ import annotations

import dataclasses
import math
import warnings

import gymnasium as gym
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from rlkit.algos.a2c import A2CConfig, nstep_advantages  # noqa: E402
from rlkit.algos.policy_heads import action_kind_of, make_actor_critic  # noqa: E402
from rlkit.algos.ddpg import DDPGConfig, DDPGSpec  # noqa: E402
from rlkit.algos.dqn import DQNConfig, DQNSpec  # noqa: E402
from rlkit.algos.impala import IMPALAConfig  # noqa: E402
from rlkit.algos.ppo import PPOConfig  # noqa: E402
from rlkit.algos.sac import SACConfig  # noqa: E402
from rlkit.algos.vtrace import vtrace  # noqa: E402
from rlkit.core.metrics import History  # noqa: E402
from rlkit.distributed.a3c.driver import train_a2c  # noqa: E402
from rlkit.distributed.impala.driver import train_impala_ray  # noqa: E402
from rlkit.envs.make import check_env_id  # noqa: E402
from rlkit.notebook.plotting import moving_average, plot_reward_curves  # noqa: E402
from rlkit.notebook.render import episode_frames  # noqa: E402
from rlkit.testing.faulty_envs import UNBOUNDED_PENDULUM  # noqa: E402
from rlkit.train.impala import train_impala  # noqa: E402
from rlkit.train.loop import train_dqn, train_sac, train_single_process  # noqa: E402
from rlkit.train.ppo import train_ppo  # noqa: E402

T, B = 4, 3


class TwoButtonCartPole(gym.Wrapper):
    """CartPole whose action is a MultiDiscrete pair (only the first counts)."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.action_space = gym.spaces.MultiDiscrete([2, 2])

    def step(self, action):
        return self.env.step(int(action[0]))


if "TwoButtonCartPole-v0" not in gym.registry:
    gym.register("TwoButtonCartPole-v0", entry_point=TwoButtonCartPole)


def vtrace_inputs(**changes) -> dict:
    """A valid V-trace call on a (4, 3) grid; ``changes`` replace single inputs."""
    g = torch.Generator().manual_seed(0)
    inputs = dict(behaviour_log_probs=-torch.rand(T, B, generator=g),
                  target_log_probs=-torch.rand(T, B, generator=g),
                  rewards=torch.ones(T, B), values=torch.rand(T, B, generator=g),
                  bootstrap_value=torch.zeros(B), discounts=torch.full((T, B), 0.9))
    return {**inputs, **changes}


def nstep_inputs(**changes) -> dict:
    inputs = dict(rewards=np.ones((T, B)), values=np.zeros((T, B)),
                  terminations=np.zeros((T, B)), truncations=np.zeros((T, B)),
                  final_values=np.zeros((T, B)), last_values=np.zeros(B), gamma=0.9)
    return {**inputs, **changes}


def with_nan(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[1, 2] = math.nan
    return x


CASES = [
    ("vtrace NaN target log-probs", lambda: vtrace(**vtrace_inputs(
        target_log_probs=with_nan(vtrace_inputs()["target_log_probs"]))), FloatingPointError,
     r"target_log_probs holds NaN or infinite values, so V-trace would return NaN targets.*Fix:"),
    ("vtrace NaN rewards and infinite values", lambda: vtrace(**vtrace_inputs(
        rewards=with_nan(torch.ones(T, B)), values=torch.full((T, B), math.inf))),
     FloatingPointError,
     r"rewards, values hold NaN or infinite values.*Fix:"),
    ("vtrace numpy arrays", lambda: vtrace(**{k: v.numpy() for k, v in vtrace_inputs().items()}),
     TypeError, r"behaviour_log_probs is a ndarray, but vtrace takes torch tensors. Fix: pass "
     r"torch.as_tensor\(behaviour_log_probs\)"),
    ("nstep_advantages values too short", lambda: nstep_advantages(**nstep_inputs(
        values=np.zeros((T - 1, B)))), ValueError,
     r"values has shape \(3, 3\), but rewards has \(4, 3\), so values must be \(4, 3\). Fix:"),
    ("nstep_advantages last_values per step", lambda: nstep_advantages(**nstep_inputs(
        last_values=np.zeros((T, B)))), ValueError, r"last_values must be \(3,\). Fix:"),
    ("nstep_advantages truncations transposed", lambda: nstep_advantages(**nstep_inputs(
        truncations=np.zeros((B, T)))), ValueError, r"truncations has shape \(3, 4\).*Fix:"),
    ("nstep_advantages 1-d rewards", lambda: nstep_advantages(**nstep_inputs(
        rewards=np.ones(T))), ValueError, r"rewards has shape \(4,\), but nstep_advantages needs "
     r"time-major \(T, B\) inputs with T >= 1. Fix:"),
    ("nstep_advantages NaN rewards", lambda: nstep_advantages(**nstep_inputs(
        rewards=np.where(np.arange(T * B).reshape(T, B) == 5, np.nan, 1.0))), FloatingPointError,
     r"rewards holds NaN or infinite values, so nstep_advantages would return NaN.*Fix:"),
    ("nstep_advantages infinite last values", lambda: nstep_advantages(**nstep_inputs(
        last_values=np.full(B, math.inf))), FloatingPointError,
     r"last_values holds NaN or infinite values.*Fix:"),
    ("nstep_advantages lambda above 1", lambda: nstep_advantages(**nstep_inputs(), lam=1.5),
     ValueError, r"lam=1.5 must be a number in \[0, 1\].*Fix: use e.g. lam=0.95"),
    ("nstep_advantages NaN lambda", lambda: nstep_advantages(**nstep_inputs(), lam=math.nan),
     ValueError, r"lam=nan must be a number in \[0, 1\]"),
    ("make_actor_critic misspelt kind", lambda: make_actor_critic(3, 1, (8,), "gausian"),
     ValueError, r"kind='gausian' is not an action kind. Fix: pass \"discrete\""),
    ("PPO on MultiDiscrete actions", lambda: action_kind_of("TwoButtonCartPole-v0"), ValueError,
     r"env_id='TwoButtonCartPole-v0' has the action space MultiDiscrete\(\[2 2\]\), but the "
     r"on-policy heads act on Discrete actions \(categorical\) or a 1-D Box.*Fix:"),
    ("moving_average window 0", lambda: moving_average([1.0, 2.0], 0), ValueError,
     r"window=0 must be an int >= 1.*Fix:"),
    ("plot_reward_curves x minutes", lambda: plot_reward_curves({}, x="minutes"), ValueError,
     r"x='minutes' is not an axis plot_reward_curves draws. Fix: pass x=\"steps\""),
    ("plot_reward_curves evaluation mean", lambda: plot_reward_curves({}, evaluation="mean"),
     ValueError, r"evaluation='mean' is not a kind of evaluation. Fix:"),
    ("plot_reward_curves window 0", lambda: plot_reward_curves({}, window=0), ValueError,
     r"window=0 must be an int >= 1.*Fix:"),
    ("episode_frames every 0", lambda: episode_frames("CartPole-v1", None, 0, every=0),
     ValueError, r"every=0 must be an int >= 1.*Fix:"),
    ("an id of one's own, not imported", lambda: check_env_id("MyGame-v0"), ValueError,
     r"env_id='MyGame-v0' is not a registered gymnasium environment.*for an env of your own, "
     r"name the module that registers it before the id, 'my_package.my_envs:MyGame-v0'"),
    ("episode_frames an unknown version", lambda: episode_frames("CartPole-v9", None, 0),
     ValueError, r"env_id='CartPole-v9' is not a registered gymnasium environment.*Fix:"),
    ("train_ppo given APPO", lambda: train_ppo(PPOConfig(synchronous=False)), ValueError,
     r"synchronous=False is APPO, but train_ppo trains on-policy.*Fix: call "
     r"train_appo_ray\(config\)"),
    ("train_impala_ray given PPO", lambda: train_impala_ray(PPOConfig()), TypeError,
     r"train_impala_ray was given a PPOConfig \(PPO\).*Fix: call train_ppo_ray\(config\)"),
    ("train_impala_ray given APPO", lambda: train_impala_ray(PPOConfig(synchronous=False)),
     TypeError, r"Fix: call train_appo_ray\(config\)"),
    ("SAC on an unbounded action box", lambda: train_sac(SACConfig(env_id=UNBOUNDED_PENDULUM)),
     ValueError, r"the action box low=\[-inf\], high=\[inf\] is unbounded or empty on "
     r"dimension\(s\) \[0\], but SquashedGaussianActor squashes.*Fix: wrap the env in "
     r"gymnasium.wrappers.ClipAction"),
    ("DDPG on an unbounded action box", lambda: train_single_process(DDPGSpec(DDPGConfig(
        env_id=UNBOUNDED_PENDULUM))), ValueError, r"DeterministicActor squashes.*Fix:"),
    # a Ray driver's run option given to a one-process trainer: refused naming the Ray driver
    ("train_dqn given num_learners", lambda: train_dqn(DQNConfig(), num_learners=2), TypeError,
     r"train_dqn got num_learners=2, which it does not take: it trains in this one process and "
     r"takes progress, checkpoint_dir, checkpoint_every, checkpoint_buffer, resume_from. Fix: drop "
     r"num_learners, or.*call train_dqn_ray\(config, ...\)"),
    ("train_sac given a misspelt checkpoint_dir", lambda: train_sac(SACConfig(),
                                                                    chekpoint_dir="x"),
     TypeError, r"train_sac got chekpoint_dir='x'.*Fix: did you mean 'checkpoint_dir'\?"),
    ("train_ppo given num_learners", lambda: train_ppo(PPOConfig(), num_learners=2),
     TypeError, r"train_ppo got num_learners=2.*takes progress, checkpoint_dir, checkpoint_every, "
     r"resume_from. Fix: drop num_learners.*train_ppo_ray\(config, ...\)"),
    ("train_ppo given checkpoint_buffer",
     lambda: train_ppo(PPOConfig(), checkpoint_buffer=False), TypeError,
     r"train_ppo got checkpoint_buffer=False.*takes progress, checkpoint_dir.*drop "
     r"checkpoint_buffer"),
    ("train_impala given timeout_s", lambda: train_impala(IMPALAConfig(), timeout_s=5),
     TypeError, r"train_impala got timeout_s=5.*takes policy_lag, progress.*"
     r"train_impala_ray\(config, ...\)"),
    ("train_a2c given num_learners", lambda: train_a2c(A2CConfig(), num_learners=2),
     TypeError, r"train_a2c got num_learners=2, which it does not take: it trains in this one "
     r"process and takes no option besides its config. Fix: drop num_learners.*"
     r"train_a2c_ray\(config, ...\)"),
    ("train_single_process given num_learners",
     lambda: train_single_process(DQNSpec(DQNConfig()), num_learners=2), TypeError,
     r"train_single_process got num_learners=2.*takes progress, checkpoint_dir.*Fix: drop "
     r"num_learners.*train_ray\(algo, ...\)"),
    ("train_dqn's checkpoint_every without checkpoint_dir",
     lambda: train_dqn(DQNConfig(), checkpoint_every=100), ValueError,
     r"checkpoint_every=100 says how often to save, but checkpoint_dir is not set, so nothing "
     r"would be saved. Fix: pass checkpoint_dir=... too, or leave checkpoint_every out"),
    ("train_ppo's checkpoint_every without checkpoint_dir",
     lambda: train_ppo(PPOConfig(), checkpoint_every=5), ValueError,
     r"checkpoint_every=5 says how often to save, but checkpoint_dir is not set.*Fix:"),
]


@pytest.mark.parametrize("case, call, error, pattern", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_is_refused_naming_the_argument(case, call, error, pattern):
    with pytest.raises(error, match=pattern) as caught:
        call()
    assert "Fix:" in str(caught.value)


# ---- the valid inputs next door


def test_vtrace_takes_an_action_the_target_policy_can_no_longer_take():
    """A target log-probability of -inf is not an error: that step's importance weight is 0,
    and the targets stay finite."""
    target = vtrace_inputs()["target_log_probs"].clone()
    target[0, 0] = -math.inf
    out = vtrace(**vtrace_inputs(target_log_probs=target))
    assert out.clipped_rhos[0, 0] == 0 and bool(torch.isfinite(out.vs).all())
    assert bool(torch.isfinite(out.pg_advantages).all())


def test_nstep_advantages_of_matching_shapes_and_the_plot_helpers_still_work():
    returns, advantages = nstep_advantages(**nstep_inputs())
    assert returns.shape == (T, B) and returns[-1, 0] == 1.0
    assert returns[0, 0] == pytest.approx(1 + 0.9 + 0.81 + 0.729)
    # final_values is read only where a step was truncated: a NaN elsewhere is not an error
    truncated = np.zeros((T, B))
    truncated[1, 0] = 1.0
    unread_nan = np.where(truncated > 0, 2.0, np.nan)
    returns, _ = nstep_advantages(**nstep_inputs(truncations=truncated, final_values=unread_nan))
    assert np.isfinite(returns).all() and returns[1, 0] == pytest.approx(1 + 0.9 * 2.0)
    assert moving_average([1.0, 3.0], 1).tolist() == [1.0, 3.0]
    h = History()
    h.eval_steps, h.eval_seconds, h.eval_returns, h.eval_stds = [1], [0.5], [10.0], [1.0]
    ax = plot_reward_curves({"run": h}, x="seconds", evaluation="deterministic")
    assert "run: deterministic eval" in ax.get_legend_handles_labels()[1]


def test_ppo_settings_that_contradict_each_other_are_refused_or_warned():
    with pytest.raises(ValueError, match=r"use_vtrace=True with synchronous=True: a synchronous "
                                         r"run has no policy lag.*Fix:"):
        PPOConfig(use_vtrace=True)
    with pytest.warns(UserWarning, match=r"gae_lambda=0.95 has no effect with use_vtrace=True"
                                         r".*Fix:"):
        PPOConfig(synchronous=False, use_vtrace=True, gae_lambda=0.95)
    with warnings.catch_warnings():  # APPO as notebook 08 makes it: nothing to warn about
        warnings.simplefilter("error")
        appo = dataclasses.replace(PPOConfig(), synchronous=False, use_vtrace=True)
    assert appo.use_vtrace and not appo.synchronous
