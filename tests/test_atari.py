"""Atari through the same code path (issue 40): ``Atari/Pong-v5`` is built by id, its frames are
ale-py's 84x84 stacks in uint8 from its own vector env, and APPO on Ray trains on them with the
Nature conv net, leaving nothing running. (Learning Pong takes hours on 2 cores:
``benchmarks/pong.py`` is the run for a bigger machine.)"""

import builtins
import dataclasses

import numpy as np
import pytest

from rlkit.algos.ppo import PONG_APPO
from rlkit.envs.atari import AtariFrames, atari_vector_env
from rlkit.envs.make import make_env
from rlkit.envs.runner import EnvRunner

pytest.importorskip("ale_py")

FRAME = (4, 84, 84)  # 4 stacked 84x84 grey frames
FRAME_BYTES = 4 * 84 * 84


def test_an_atari_id_builds_the_preprocessed_game():
    env = make_env("Atari/Pong-v5", 0, "discrete", "APPO", images=True)
    assert isinstance(env.unwrapped, AtariFrames)
    assert env.observation_space.shape == FRAME and env.observation_space.dtype == np.uint8
    assert env.action_space.n == 6  # Pong's minimal action set
    obs, _ = env.reset(seed=1)
    again, _ = env.reset(seed=1)
    assert obs.dtype == np.uint8 and (obs == again).all()  # seeded
    total, done = 0.0, False
    while not done:  # a whole episode of NOOPs: the opponent scores 21 (returns are scores)
        obs, reward, terminated, truncated, _ = env.step(0)
        total, done = total + reward, terminated or truncated
    assert total == -21.0
    env.close()


def test_the_runner_steps_ale_py_s_own_vector_env_and_keeps_uint8_frames():
    runner = EnvRunner("Atari/Pong-v5", 0, "discrete", "APPO", 4, images=True)
    assert type(runner.vec).__name__ == "AtariVectorEnv"  # native: one C++ env, one thread
    fragment = runner.run(16, lambda obs: np.ones(len(obs), np.int64), fixed_length=True)
    assert fragment.obs.shape == (16, 4, *FRAME) and fragment.obs.dtype == np.uint8
    assert fragment.obs.nbytes == 16 * 4 * FRAME_BYTES  # 1.8 MB; 4x that as float32
    assert fragment.rewards.dtype == np.float32
    runner.close()


def test_without_ale_py_an_atari_id_names_the_fix(monkeypatch):
    real_import = builtins.__import__

    def no_ale(name, *args, **kwargs):
        if name.startswith("ale_py"):
            raise ImportError("No module named 'ale_py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ale)
    with pytest.raises(ImportError, match=r"Atari ids need ale-py.*Fix: pip install "
                                          r"'ale-py==0.12.1'"):
        atari_vector_env("pong", 2)


@pytest.mark.ray
def test_appo_trains_on_pong_frames_on_ray_and_leaves_nothing_running(ray_cluster):
    """A few hundred env steps of APPO on Pong: the learner's network starts with the Nature
    conv net (32 8x8 filters over the 4 frames), the run counts its frames and stops."""
    from conftest import wait_until_no_actors

    from rlkit.distributed import train_appo_ray

    config = dataclasses.replace(PONG_APPO, num_workers=1, envs_per_worker=4, unroll_length=32,
                                 batch_fragments=1, queue_size=2, minibatch_size=64, epochs=1,
                                 hidden=(64,), total_steps=384, eval_every=100_000,
                                 eval_episodes=1, target_return=None)
    result = train_appo_ray(config)
    assert result.env_steps >= 384 and result.updates >= 1
    first_conv = [w for w in result.weights.values() if np.asarray(w).ndim == 4][0]
    assert np.asarray(first_conv).shape == (32, 4, 8, 8)
    # one conv net under the policy and the value (shared_encoder): the same weights in both
    np.testing.assert_array_equal(result.weights["actor.0.net.0.weight"],
                                  result.weights["critic.0.net.0.weight"])
    assert len(result.history.eval_returns) == 1 and -21 <= result.history.eval_returns[0] <= 21
    assert wait_until_no_actors() == []
