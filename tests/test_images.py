"""Image observations end to end (issue 40): frames travel as the env returns them (uint8)
through the runner, fragments and replay; the network's encoder, chosen by the observation,
converts them on the learner's device; an algorithm whose networks are MLPs refuses them before
anything starts."""

import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlkit.algos.dqn import DQNConfig, DQNSpec
from rlkit.algos.prioritized_td import td_tensors
from rlkit.core.encoders import Flat, NatureConv, SmallConv, make_encoder
from rlkit.core.networks import QNetwork
from rlkit.core.spaces import ObsSpec, obs_spec
from rlkit.envs.breakout import ENV_ID
from rlkit.envs.make import make_env
from rlkit.envs.runner import EnvRunner
from rlkit.replay.buffers import ReplayBuffer
from rlkit.replay.memory import replay_bytes
from rlkit.replay.prioritized import PrioritizedReplay
from rlkit.testing import faulty_envs

BREAKOUT = ObsSpec((4, 10, 10), np.dtype(np.uint8))
ATARI = obs_spec(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8))


def test_the_spec_follows_the_space():
    assert obs_spec(make_env("CartPole-v1", 0).observation_space) == ((4,), np.float32, 1.0)
    assert obs_spec(make_env(ENV_ID, 0).observation_space) == BREAKOUT  # {0, 1}: scale 1
    assert ATARI.scale == pytest.approx(1 / 255) and ATARI.kind == "image"
    assert BREAKOUT.nbytes == 400 and ATARI.nbytes == 4 * 84 * 84
    float64 = gym.spaces.Box(-1.0, 1.0, (3,), np.float64)
    assert obs_spec(float64).dtype == np.float32  # vectors travel as float32, as before


def test_a_space_no_network_here_takes_is_refused_naming_the_env_and_the_fix():
    with pytest.raises(ValueError, match=r"takes a Box observation of 1 dimension .* or 3 .* but "
                                         r"grid has Box.*Fix: .*FlattenObservation"):
        obs_spec(gym.spaces.Box(0, 1, (10, 10), np.uint8), "grid")
    with pytest.raises(ValueError, match=r"SAC here acts on vector observations only .* but "
                                         r"pixels returns images of shape \(4, 10, 10\) \(uint8\)"
                                         r".*Fix: use an algorithm that takes images \(DQN"):
        obs_spec(make_env(ENV_ID, 0).observation_space, "pixels", "SAC", images=False)


@pytest.mark.parametrize("shape", [(10, 10, 10), (4, 84, 4)])
def test_an_image_whose_channels_cannot_be_told_from_its_shape_is_refused(shape):
    """MinAtar Seaquest's frames are (10, 10, 10) channels last: read as channels first they
    would train a network on transposed frames without a word."""
    with pytest.raises(ValueError, match=rf"seaquest returns images of shape {re.escape(str(shape))}"
                                         r": its first and last sides are equal.*Fix: make the "
                                         r"env return frames channels first"):
        obs_spec(gym.spaces.Box(0, 1, shape, np.uint8), "seaquest")
    with pytest.raises(ValueError, match=r"first and last sides are equal.*Fix"):
        make_encoder(ObsSpec(shape, np.dtype(np.uint8)))  # a spec made by hand: the same rule


def test_a3c_refuses_frames_before_any_actor_starts():
    """A2C/A3C's networks are MLPs here: the driver's probe of the env ids (before any actor
    starts) names the env's frames; it does not flatten them silently."""
    from rlkit.envs.make import check_worker_env_ids

    with pytest.raises(ValueError, match=r"A2C here acts on vector observations only .* "
                                         r"rlkit/BreakoutMinAtar-v0 returns images"):
        check_worker_env_ids(None, 2, ENV_ID, 0, "discrete", "A2C")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["IMPALA", "PPO"])
def test_the_on_policy_algorithms_train_on_frames_in_one_process(algorithm):
    """IMPALA's and PPO's actor-critic get a conv encoder each (actor and critic stay separate
    networks), fed uint8 fragments; a short run updates and evaluates."""
    from rlkit.algos import IMPALAConfig, PPOConfig
    from rlkit.train import train_impala, train_ppo

    config_class, train = {"IMPALA": (IMPALAConfig, train_impala),
                           "PPO": (PPOConfig, train_ppo)}[algorithm]
    config = config_class(env_id=ENV_ID, hidden=(32,), total_steps=1_000, eval_every=1_000,
                          eval_episodes=2, target_return=None)
    result = train(config)
    for network in ("actor", "critic"):  # each: Sequential(SmallConv, mlp)
        assert result.weights[f"{network}.0.net.0.weight"].shape == (16, 4, 3, 3)
    assert result.updates >= 1 and len(result.history.eval_returns) >= 1


def test_a_shared_encoder_is_one_conv_net_under_both_heads():
    """``shared_encoder=True``: one encoder object is the first layer of the actor and of the
    critic, its parameters counted once, its features computed once for both heads and
    trained by the value's loss too; the weights travel as a state dict like any other."""
    from rlkit.algos.actor_critic import ActorCritic
    from rlkit.core.networks import load_numpy_weights, module_weights

    torch.manual_seed(0)
    shared, separate = (ActorCritic(ATARI, 6, (16,), shared_encoder=True),
                        ActorCritic(ATARI, 6, (16,)))
    assert shared.actor[0] is shared.critic[0] and separate.actor[0] is not separate.critic[0]
    conv = sum(p.numel() for p in make_encoder(ATARI).parameters())
    assert (sum(p.numel() for p in separate.parameters())
            - sum(p.numel() for p in shared.parameters())) == conv
    frames = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    logits, values = shared(frames)
    torch.testing.assert_close(logits, shared.actor(frames))
    torch.testing.assert_close(values, shared.critic(frames).squeeze(-1))
    values.sum().backward()  # the value's loss alone reaches the features the policy reads
    assert shared.actor[0].net[0].weight.grad.abs().sum() > 0
    assert shared.actor[1][0].weight.grad is None
    worker = ActorCritic(ATARI, 6, (16,), shared_encoder=True)
    load_numpy_weights(worker, module_weights(shared))
    assert worker.actor[0] is worker.critic[0]
    torch.testing.assert_close(worker(frames)[0], logits)


def test_a_shared_encoder_on_a_vector_is_refused_naming_the_fix():
    from rlkit.algos import PPOConfig
    from rlkit.algos.policy_heads import make_actor_critic
    from rlkit.train import train_ppo

    message = r"shared_encoder=True, but the observation is a vector of 4 numbers.*Fix: leave"
    for kind in ("discrete", "continuous"):
        with pytest.raises(ValueError, match=message):
            make_actor_critic(4, 2, (8,), kind, shared_encoder=True)
    with pytest.raises(ValueError, match=r"shared_encoder=True, but the observation is a vector"):
        train_ppo(PPOConfig(shared_encoder=True))


def test_the_breakout_presets_are_ppo_and_appo_of_the_same_settings():
    """Notebook 09's settings: APPO's preset is PPO's, asynchronous with V-trace, and builds
    without the warning a non-default gae_lambda gives under V-trace (which replaces GAE)."""
    import warnings

    from rlkit.algos import ppo

    appo, sync = ppo.BREAKOUT_MINATAR_APPO, ppo.BREAKOUT_MINATAR
    assert sync.synchronous and not sync.use_vtrace and appo.env_id == sync.env_id == ENV_ID
    assert not appo.synchronous and appo.use_vtrace
    assert {f: getattr(appo, f) for f in ("epochs", "minibatch_size", "learning_rate", "hidden")} \
        == {f: getattr(sync, f) for f in ("epochs", "minibatch_size", "learning_rate", "hidden")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ppo.PPOConfig(**{f: getattr(appo, f) for f in appo.__dataclass_fields__})


@pytest.mark.parametrize("num_envs", [1, 3])
def test_the_runner_keeps_frames_as_uint8(num_envs):
    runner = EnvRunner(ENV_ID, 0, "discrete", "DQN", num_envs, images=True)
    fragment = runner.run(20, lambda obs: np.zeros(len(obs), np.int64), fixed_length=True)
    assert fragment.obs.dtype == fragment.next_obs.dtype == np.uint8
    assert fragment.obs.shape == (20, num_envs, 4, 10, 10)
    batch = fragment.batch
    assert batch.obs.dtype == np.uint8 and batch.obs.shape[1:] == (4, 10, 10)
    # 400 bytes a frame, against 1,600 as float32
    assert fragment.obs.nbytes == 20 * num_envs * 400
    runner.close()
    vector = EnvRunner("CartPole-v1", 0, "discrete", "DQN")
    assert vector.run(5, lambda obs: np.zeros(len(obs), np.int64)).obs.dtype == np.float32
    vector.close()


@pytest.mark.parametrize("env_id, message", [
    (faulty_envs.FLOAT_FRAMES, r"returned float32 observations, but its observation_space "
                               r"declares uint8 images"),
    (faulty_envs.WRONG_SHAPE_FRAMES, r"returned observations of shape \(4, 10, 9\), but its "
                                     r"observation_space says \(4, 10, 10\)")])
def test_a_frame_unlike_the_space_is_refused_naming_the_env(env_id, message):
    runner = EnvRunner(env_id, 0, "discrete", "DQN", images=True)
    runner.run(50, lambda obs: np.zeros(len(obs), np.int64))  # before step 100: fine
    with pytest.raises(ValueError, match=re_env(env_id) + " " + message + r".*Fix:"):
        runner.run(100, lambda obs: np.zeros(len(obs), np.int64))
    runner.close()


def re_env(env_id: str) -> str:
    return env_id.replace(".", r"\.")


def test_the_encoder_is_chosen_by_the_observation():
    assert isinstance(make_encoder(4), Flat) and make_encoder(4).out_features == 4
    small = make_encoder(BREAKOUT)
    assert isinstance(small, SmallConv) and small.out_features == 16 * 8 * 8
    large = make_encoder(ATARI)
    assert isinstance(large, NatureConv) and large.out_features == 64 * 7 * 7
    with pytest.raises(ValueError, match=r"too small for a 3x3 convolution.*Fix"):
        make_encoder(ObsSpec((1, 2, 2), np.dtype(np.uint8)))


def test_frames_become_floats_in_the_network_scaled_and_in_either_layout():
    torch.manual_seed(0)
    first = make_encoder(ATARI)
    frames = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    # uint8 0..255 times 1/255 gives what the same network computes on floats in [0, 1]
    torch.testing.assert_close(first(frames), first.net(frames.float() / 255))
    last = make_encoder(ObsSpec((10, 10, 4), np.dtype(np.uint8)))  # MinAtar's own layout
    first_small = make_encoder(BREAKOUT)
    last.load_state_dict(first_small.state_dict())
    grid = torch.randint(0, 2, (3, 4, 10, 10), dtype=torch.uint8)
    torch.testing.assert_close(last(grid.permute(0, 2, 3, 1)), first_small(grid))


def test_a_vector_q_network_is_the_mlp_it_was():
    """Same parameters in the same order from the same seed, same keys: a checkpoint or a
    seed's run of before issue 40 is unchanged (notebook 01's steps to solve rest on it)."""
    torch.manual_seed(0)
    q = QNetwork(4, 2, (8,))
    assert list(q.state_dict()) == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]
    assert q(torch.zeros(1, 4, dtype=torch.float64)).dtype == torch.float32


def test_replay_keeps_frames_in_their_dtype_and_counts_the_real_bytes():
    buffer = ReplayBuffer(1_000, BREAKOUT, None, seed=0)
    held = sum(getattr(buffer, name).nbytes for name in buffer.fields)
    assert buffer.obs.dtype == np.uint8 and held == replay_bytes(1_000, BREAKOUT, None)
    # 1M MinAtar transitions: obs and next_obs 800 bytes, action 8, reward and flag 8
    assert replay_bytes(1_000_000, BREAKOUT, None) == 816_000_000
    prioritized = PrioritizedReplay(64, BREAKOUT, None, seed=0)
    assert prioritized.storage.obs.dtype == np.uint8
    runner = EnvRunner(ENV_ID, 0, "discrete", "DQN", images=True)
    batch = runner.run(32, lambda obs: np.ones(len(obs), np.int64)).batch
    runner.close()
    buffer.add_batch(batch)
    sample = buffer.sample(8)
    assert sample.obs.dtype == np.uint8 and sample.obs.shape == (8, 4, 10, 10)
    as_floats = type(batch)(batch.obs.astype(np.float32), *batch[1:])
    with pytest.raises(ValueError, match=r"batch\.obs\.dtype=.float32.* is a float copy of "
                                         r"frames this buffer keeps as uint8.*Fix"):
        buffer.add_batch(as_floats)


def test_a_dqn_update_on_frames_learns_from_uint8_batches():
    env = make_env(ENV_ID, 0)
    spec = DQNSpec(DQNConfig(env_id=ENV_ID, hidden=(32,), batch_size=16))
    learner, buffer = spec.make_learner(env, torch.device("cpu")), spec.make_buffer(env, "cpu")
    assert isinstance(learner.q.encoder, SmallConv) and buffer.obs.dtype == np.uint8
    runner = EnvRunner(ENV_ID, 0, "discrete", "DQN", images=True)
    buffer.add_batch(runner.run(64, lambda obs: np.arange(len(obs)) % 6).batch)
    runner.close()
    batch = buffer.sample(16)
    assert td_tensors(batch, 0.99, torch.device("cpu")).obs.dtype == torch.uint8
    before = [p.clone() for p in learner.q.parameters()]
    report = learner.update(batch)
    assert np.isfinite(report.loss)
    assert all(not torch.equal(a, b) for a, b in zip(before, learner.q.parameters()))
    env.close()


@pytest.mark.slow
def test_dqn_trains_on_breakout_in_one_process():
    """The whole single-process loop on frames: it runs, evaluates, and its evaluation acts
    on uint8 frames (a few hundred updates: a learning curve is the notebook's, not this
    test's)."""
    from rlkit.train import train_dqn

    config = DQNConfig(env_id=ENV_ID, hidden=(32,), total_steps=600, learning_starts=200,
                       batch_size=32, buffer_size=1_000, eval_every=600, eval_episodes=2,
                       target_return=None)
    result = train_dqn(config)
    assert result.env_steps == 600 and len(result.history.eval_returns) == 1
    assert isinstance(result.learner.q.encoder, SmallConv)


def test_n_step_windows_keep_frames_and_bootstrap_from_the_frame_n_steps_on():
    """Ape-X's n-step transitions on frames: next_obs is the frame ``n`` steps later, uint8."""
    from rlkit.replay.nstep import NStepBuilder

    runner = EnvRunner(ENV_ID, 0, "discrete", "Ape-X DQN", images=True)
    fragment = runner.run(40, lambda obs: np.full(len(obs), 3, np.int64))
    runner.close()
    batch, ends = fragment.batch, fragment.batch_ends
    out = NStepBuilder(3, 0.9, 1).add(batch, ends, fragment.batch_env_ids)
    assert out.next_obs.dtype == np.uint8 and out.next_obs.shape[1:] == (4, 10, 10)
    assert not ends[:3].any()  # the first window runs its 3 steps
    np.testing.assert_array_equal(out.next_obs[0], batch.next_obs[2])
    assert out.discounts[0] == pytest.approx(0.9 ** 3)


def test_a_replay_of_frames_that_cannot_fit_is_refused_counting_bytes_not_floats():
    """20M MinAtar transitions need 16.3 GB as uint8 (65 GB as float32): refused before any
    allocation, naming buffer_size and the largest that fits. With 4 GiB free (a limit of 80%
    of it), 2M of them (1.6 GB) fit; as float32 frames they would need 6.4 GB and be refused."""
    from rlkit.replay.memory import MAX_BUFFER_BYTES, check_buffer_memory

    with pytest.raises(ValueError, match=r"buffer_size=20000000 would need 15\.2 GiB .*Fix: "
                                         r"use buffer_size <= \d+"):
        ReplayBuffer(20_000_000, BREAKOUT, None)
    free = MAX_BUFFER_BYTES // 2  # as if 4 GiB were free
    assert check_buffer_memory(2_000_000, BREAKOUT, None, free=free) == 1_632_000_000
    with pytest.raises(ValueError, match="buffer_size=2000000 would need 6.0 GiB"):
        check_buffer_memory(2_000_000, ObsSpec((4, 10, 10), np.dtype(np.float32)), None,
                            free=free)
