"""Breakout-MinAtar (rlkit/envs/breakout.py): a gymnasium env by id, its rules by hand, and the
same frames, rewards and episode ends as the original ``minatar`` package (GPL-3.0, installed by
``make install`` as a test tool only) for the same seed and actions."""

import gymnasium as gym
import numpy as np
import pytest

from rlkit.envs.breakout import (BALL, BRICK, ENV_ID, LEFT, MAX_EPISODE_STEPS, NOOP, PADDLE,
                                 RIGHT, TRAIL, BreakoutMinAtar)
from rlkit.envs.make import make_env


def test_built_by_id_with_minatar_s_spaces_and_a_time_limit():
    env = make_env(ENV_ID, seed=0)
    obs, _ = env.reset(seed=0)
    assert env.observation_space == gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
    assert env.action_space == gym.spaces.Discrete(6) and env.spec.max_episode_steps == 10_000
    assert obs.dtype == np.uint8 and obs.shape == (4, 10, 10)
    assert obs[BRICK, 1:4].all() and obs[BRICK].sum() == 30 and obs[PADDLE, 9, 4] == 1
    assert obs[BALL].sum() == 1 and obs[BALL, 3].sum() == 1 and obs[BALL, 3, [0, 9]].sum() == 1
    env.close()
    from gymnasium.utils.env_checker import check_env

    check_env(BreakoutMinAtar(), skip_render_check=True)  # gymnasium's own API checks


def _placed(x, y, direction, paddle=4, bricks=None):
    env = BreakoutMinAtar(sticky_action_prob=0.0)
    env.reset(seed=0)
    env.ball_x, env.ball_y, env.direction, env.paddle = x, y, direction, paddle
    if bricks is not None:
        env.bricks[:] = 0
        for by, bx in bricks:
            env.bricks[by, bx] = 1
    return env


def test_the_rules_by_hand():
    # a brick breaks (+1) and sends the ball back down; the trail marks where it was
    env = _placed(x=5, y=5, direction=1, bricks=[(4, 6)])  # moving up-right into (6, 4)
    obs, reward, over, _, _ = env.step(NOOP)
    assert reward == 1.0 and not over and env.bricks.sum() == 0
    assert (env.ball_x, env.ball_y, env.direction) == (6, 5, 2)  # back to row 5, now down-right
    assert obs[TRAIL, 5, 5] == 1 and obs[BALL, 5, 6] == 1
    # a side wall reflects: up-left at x = 0 turns up-right, the ball staying on the wall
    env = _placed(x=0, y=6, direction=0, bricks=[])
    env.step(NOOP)
    assert (env.ball_x, env.ball_y, env.direction) == (0, 5, 1)
    # the ceiling reflects
    env = _placed(x=4, y=0, direction=1, bricks=[])
    env.step(NOOP)
    assert (env.ball_x, env.ball_y, env.direction) == (5, 0, 2)
    # the paddle under the ball bounces it up, going on sideways: down-right becomes up-right
    env = _placed(x=4, y=8, direction=2, paddle=4, bricks=[(1, 1)])
    _, reward, over, _, _ = env.step(NOOP)
    assert not over and reward == 0 and (env.ball_x, env.ball_y, env.direction) == (5, 8, 1)
    # the paddle where the ball lands (hit on its side) sends it back: down-right to up-left
    env = _placed(x=4, y=8, direction=2, paddle=5, bricks=[(1, 1)])
    _, _, over, _, _ = env.step(NOOP)
    assert not over and (env.ball_x, env.ball_y, env.direction) == (5, 8, 0)
    # anywhere else on the bottom row: the episode ends; stepping on is refused
    env = _placed(x=4, y=8, direction=2, paddle=0, bricks=[(1, 1)])
    _, _, over, truncated, _ = env.step(NOOP)
    assert over and not truncated
    with pytest.raises(RuntimeError, match="reset"):
        env.step(NOOP)
    # the paddle moves one cell and stops at the edges
    env = _placed(x=0, y=5, direction=1, paddle=0)
    env.step(LEFT)
    assert env.paddle == 0
    env.step(RIGHT)
    assert env.paddle == 1
    # no brick left when the ball reaches the paddle's row: three new rows
    env = _placed(x=4, y=8, direction=2, paddle=4, bricks=[])
    env.step(NOOP)
    assert env.bricks[1:4].all() and env.bricks.sum() == 30


def test_sticky_actions_repeat_the_previous_action_one_time_in_ten():
    env = BreakoutMinAtar()
    env.reset(seed=1)
    repeated = 0
    for step in range(20_000):
        before = env.paddle
        if env.over:
            env.reset()
            continue
        env.last_action = LEFT  # the previous action: left; this one asks right
        env.paddle = 5
        env.step(RIGHT)
        repeated += env.paddle == 4
        env.paddle = before
    assert 0.085 < repeated / 20_000 < 0.115  # 0.1, within 5 standard deviations


def test_the_same_frames_rewards_and_ends_as_minatar_for_the_same_seed_and_actions():
    """Frame by frame against the original: 20 seeds, a random action sequence each, through
    episode ends (a reset draws the next start from the same stream, as MinAtar's does)."""
    minatar = pytest.importorskip("minatar")  # installed by `make install`; see the Makefile
    rng = np.random.default_rng(0)
    episodes = 0
    for seed in range(20):
        theirs = minatar.Environment("breakout")
        theirs.seed(seed)
        theirs.reset()
        ours = BreakoutMinAtar()
        obs, _ = ours.reset(seed=seed)
        for _ in range(500):
            assert np.array_equal(obs.transpose(1, 2, 0), theirs.state().astype(np.uint8))
            action = int(rng.integers(6))
            their_reward, their_end = theirs.act(action)
            obs, reward, over, _, _ = ours.step(action)
            assert (reward, over) == (float(their_reward), bool(their_end))
            if over:
                episodes += 1
                theirs.reset()
                obs, _ = ours.reset()
    assert episodes > 100  # random play loses the ball within a few dozen steps


def test_a_random_policy_scores_what_minatar_s_does():
    """The issue's measurement of the original: a random policy scores about 0.49 a game."""
    env = BreakoutMinAtar()
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    returns, total = [], 0.0
    while len(returns) < 3000:
        _, reward, over, _, _ = env.step(int(rng.integers(6)))
        total += reward
        if over:
            returns.append(total)
            total = 0.0
            env.reset()
    mean, sem = np.mean(returns), np.std(returns) / np.sqrt(len(returns))
    assert abs(mean - 0.49) < 5 * sem + 0.02, (mean, sem)


def test_renders_a_frame_for_the_notebook():
    env = BreakoutMinAtar(render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    assert image.shape == (160, 160, 3) and image.dtype == np.uint8
    assert (image[9 * 16 + 8, 4 * 16 + 8] == [80, 160, 255]).all()  # the paddle's cell
    assert MAX_EPISODE_STEPS == 10_000
