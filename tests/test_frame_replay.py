"""FrameStackReplay (rlkit/replay/frames.py): each frame kept once, every stack given back
exactly. Hand-made frames of 3x5 bytes encode (env, episode, step), so a frame of the wrong
env, episode or step shows."""

from itertools import pairwise

import numpy as np
import pytest
import torch

import rlkit.replay.frames as frames_module
from rlkit.core.spaces import ObsSpec
from rlkit.core.types import Batch, NStepBatch
from rlkit.replay.buffers import ReplayBuffer
from rlkit.replay.frames import FrameStackReplay, frame_layout, frame_replay_bytes
from rlkit.replay.memory import replay_bytes
from rlkit.replay.nstep import NStepBuilder

K, H, W = 4, 3, 5
SPEC = ObsSpec((K, H, W), np.dtype(np.uint8))


def frame(env: int, episode: int, step: int) -> np.ndarray:
    """A frame that no other (env, episode, step) has."""
    f = np.full((H, W), 7, np.uint8)
    f[0, :4] = env, episode, step % 256, step // 256
    return f


def stack(env: int, episode: int, step: int, pad: str) -> np.ndarray:
    """The observation at ``step``: its last K frames; before the first, the first frame
    repeated (``pad="repeat"``) or zeros (``pad="zero"``)."""
    first = frame(env, episode, 0) if pad == "repeat" else np.zeros((H, W), np.uint8)
    return np.stack([frame(env, episode, s) if s >= 0 else first
                     for s in range(step - K + 1, step + 1)])


def rollout(num_envs: int, steps: int, pad: str = "repeat", length: int = 0
            ) -> tuple[Batch, np.ndarray, np.ndarray]:
    """``steps`` vector steps of ``num_envs`` envs as the runner's ``Fragment.batch`` orders
    them (step by step, env by env; an env's reset step left out), with ``ends`` and
    ``env_ids``. Episodes last ``length`` steps (0: 5 to 11, varying); even ones terminate,
    odd ones are truncated (their last ``next_obs`` is the final stack, the next episode's
    first ``obs`` a reset stack). ``actions`` number the rows."""
    rows: list[tuple] = []
    state = [[0, 0, False] for _ in range(num_envs)]  # episode, step, resetting
    for _ in range(steps):
        for env in range(num_envs):
            episode, step, resetting = state[env]
            if resetting:
                state[env] = [episode + 1, 0, False]
                continue
            ended = step + 1 == (length or 5 + (3 * env + 2 * episode) % 7)
            rows.append((stack(env, episode, step, pad), len(rows),
                         1000.0 * env + 10 * episode + step, stack(env, episode, step + 1, pad),
                         float(ended and episode % 2 == 0), ended, env))
            state[env] = [episode, step + 1, ended]
    obs, actions, rewards, next_obs, terms, ends, env_ids = map(np.array, zip(*rows))
    batch = Batch(obs, actions.astype(np.int64), rewards.astype(np.float32), next_obs,
                  terms.astype(np.float32))
    return batch, ends, env_ids


def pieces(batch: tuple, cuts: list[int]) -> list[tuple]:
    """``batch`` (any tuple of arrays) cut at the given rows, in order."""
    bounds, kind = [0, *cuts, len(batch[0])], type(batch)
    return [kind(*(a[lo:hi] for a in batch)) if kind is not tuple else
            tuple(a[lo:hi] for a in batch) for lo, hi in pairwise(bounds)]


def assert_rows_equal(a: tuple, b: tuple) -> None:
    """Equal fields, dtypes and bytes (so -0.0 and NaN count too)."""
    assert type(a) is type(b)
    for name, x, y in zip(a._fields, a, b):
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name


def distinct_frames(*batches: tuple) -> int:
    all_frames = np.concatenate([np.concatenate([b.obs, b.next_obs]).reshape(-1, H * W)
                                 for b in batches])
    return len(np.unique(all_frames, axis=0))


def assert_consistent(buf: FrameStackReplay) -> None:
    """Every live transition's frames are still in the frame ring, and no older than its
    reuse window allows (what evicting it in time relies on)."""
    live = buf.live_slots()
    if len(live):
        assert buf.stacks[live].min() >= buf.written - buf.frames_capacity
        assert buf.stacks[live].max() < buf.written
        assert (buf.stacks[live].min(axis=(1, 2)) >= buf.born[live] - buf.window).all()
        assert (np.diff(buf.born[live]) >= 0).all()


@pytest.mark.parametrize("capacity,frames", [(400, None), (40, 400)])
def test_every_row_and_sample_equal_a_replay_buffer_fed_the_same_batches(capacity, frames):
    """Without a wrap (default sizing) and with the transition ring wrapping several times;
    each frame stored once."""
    batch, _, _ = rollout(3, 80)
    plain = ReplayBuffer(capacity, SPEC, seed=3)
    buf = FrameStackReplay(capacity, SPEC, seed=3, frames=frames)
    for piece in pieces(batch, [5, 6, 40, 97, 150]):
        plain.add_batch(piece)
        buf.add_batch(piece)
        assert (len(buf), buf.pos) == (len(plain), plain.pos)
        assert_consistent(buf)
        live = buf.live_slots()
        assert_rows_equal(buf.rows(live), Batch(*(getattr(plain, name)[live] for name in
                                                  Batch._fields)))
    assert_rows_equal(buf.sample(64), plain.sample(64))
    assert_rows_equal(buf.sample(7), plain.sample(7))
    if frames is None:
        assert buf.written == distinct_frames(batch) < 1.2 * len(batch)


def test_episode_starts_and_truncation_versus_termination_come_back_exactly():
    """One env: a terminated episode, a truncated one (final stack as next_obs, then a reset
    stack that is no shift of it), with zero and repeat padding."""
    for pad in ("zero", "repeat"):
        batch, ends, _ = rollout(1, 30, pad)
        assert batch.terminations[ends].tolist()[:2] == [1.0, 0.0]  # both kinds are in it
        buf = FrameStackReplay(100, SPEC)
        buf.add_batch(batch)
        got = buf.rows(buf.live_slots())
        assert_rows_equal(got, batch)
        starts = np.flatnonzero(ends[:-1]) + 1
        assert (got.obs[starts] == stack(0, 1, 0, pad)).all(axis=(1, 2, 3)).any()
        assert not (got.obs[starts][:, :-1] == got.next_obs[starts - 1][:, 1:]).all()
        # a zero frame that left the reuse window is stored again, at most once an episode
        assert 0 <= buf.written - distinct_frames(batch) <= (ends.sum() if pad == "zero" else 0)


def test_interleaved_envs_in_any_order_come_back_exactly():
    """Rows of five envs time-major in one add_batch, then the same rows shuffled: every
    stack is found by content, wherever its frames came from."""
    batch, _, _ = rollout(5, 30)
    order = np.random.default_rng(0).permutation(len(batch))
    for rows in (batch, Batch(*(a[order] for a in batch))):
        buf = FrameStackReplay(1024, SPEC)
        buf.add_batch(rows)
        assert_rows_equal(buf.rows(buf.live_slots()), rows)
    assert buf.written < 2 * K * len(batch)  # shuffled, most frames are still shared


def test_n_step_transitions_from_the_builder_equal_a_replay_buffer():
    batch, ends, env_ids = rollout(3, 60)
    builder = NStepBuilder(3, 0.9, num_envs=3)
    plain = ReplayBuffer(1024, SPEC, seed=1, n_step=True)
    buf = FrameStackReplay(1024, SPEC, seed=1, n_step=True)
    added = []
    for piece in pieces((*batch, ends, env_ids), [10, 11, 50, 90]):
        out = builder.add(Batch(*piece[:5]), piece[5], piece[6])
        added.append(out)
        plain.add_batch(out)
        buf.add_batch(out)
    live = buf.live_slots()
    assert len(live) == sum(map(len, added)) > 100
    assert_rows_equal(buf.rows(live), NStepBatch(*(getattr(plain, name)[live]
                                                   for name in NStepBatch._fields)))
    assert_rows_equal(buf.sample(50), plain.sample(50))
    assert buf.written == distinct_frames(*added) < 1.3 * len(live)


@pytest.mark.parametrize("pad", ["repeat", "zero"])
def test_wrap_around_evicts_a_transition_before_its_frames_are_overwritten(pad):
    """A frame ring of its window and 30 frames for 100 transitions: the frames bind first,
    the oldest transitions go, and nothing stale is ever returned (zero padding reuses one
    zero frame across episodes, as long as it is within the window)."""
    batch, _, _ = rollout(3, 60, pad)
    window = frame_layout(100, K)[1]
    buf = FrameStackReplay(100, SPEC, frames=window + 30)
    seen = 0
    for piece in pieces(batch, list(range(5, len(batch), 5))):
        buf.add_batch(piece)
        seen += len(piece)
        assert_consistent(buf)
        got = buf.rows(buf.live_slots())
        assert 0 < len(buf) < 30 and got.actions.tolist() == list(range(seen - len(buf), seen))
        assert_rows_equal(got, Batch(*(a[got.actions] for a in batch)))
        drawn = buf.sample(200)
        assert_rows_equal(drawn, Batch(*(a[drawn.actions] for a in batch)))


def test_default_sizing_keeps_the_capacity_for_long_episodes():
    batch, _, _ = rollout(3, 400, pad="zero", length=32 * K)
    buf = FrameStackReplay(64, SPEC)
    for piece in pieces(batch, list(range(50, len(batch), 50))):
        buf.add_batch(piece)
        assert len(buf) == min(64, piece.actions[-1] + 1)
        assert_consistent(buf)


def test_a_non_stack_input_and_fingerprint_collisions_come_back_exactly(monkeypatch):
    """Float frames with -0.0 and NaN that never repeat keep 2K frames a transition; with
    every fingerprint equal, each candidate is refused by the byte comparison."""
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(40, K, H, W)).astype(np.float32)
    obs[0, 0, 0, :2], obs[1, 1, 1, 1] = [-0.0, 0.0], np.nan
    rows = Batch(obs, np.arange(40), np.ones(40, np.float32),
                 rng.normal(size=obs.shape).astype(np.float32), np.zeros(40, np.float32))
    spec = ObsSpec((K, H, W), np.dtype(np.float32))
    buf = FrameStackReplay(40, spec, frames=2 * K * 40 + frame_layout(40, K)[1])
    buf.add_batch(rows)
    assert len(buf) == 40 and buf.written == 2 * K * 40  # nothing shared, nothing lost
    assert_rows_equal(buf.rows(buf.live_slots()), rows)
    batch, _, _ = rollout(2, 20)
    buf = FrameStackReplay(100, SPEC)
    buf.add_batch(batch)
    shared = buf.written
    monkeypatch.setattr(frames_module, "fingerprints", lambda raw: np.zeros(len(raw), np.uint64))
    buf = FrameStackReplay(100, SPEC)
    buf.add_batch(batch)
    got = buf.rows(buf.live_slots())
    assert len(got) > 0 and buf.written > 3 * shared  # nearly every candidate refused
    assert_rows_equal(got, Batch(*(a[got.actions] for a in batch)))


def test_add_one_by_one_equals_add_batch():
    batch, _, _ = rollout(2, 20)
    one, many = FrameStackReplay(25, SPEC, frames=170), FrameStackReplay(25, SPEC, frames=170)
    for piece in pieces(batch, list(range(7, len(batch), 7))):
        many.add_batch(piece)
    for row in zip(*batch):
        one.add(row[0], int(row[1]), float(row[2]), row[3], bool(row[4]))
    assert (one.pos, len(one), one.written) == (many.pos, len(many), many.written)
    assert_rows_equal(one.rows(one.live_slots()), many.rows(many.live_slots()))


@pytest.mark.parametrize("capacity,spare", [(60, 40), (200, None)])
def test_state_dict_round_trip_continues_identically(capacity, spare):
    """With both rings wrapped (the frames binding), and with transitions older than the
    reuse window."""
    batch, _, _ = rollout(3, 120)
    first, rest = pieces(batch, [250])
    frames = None if spare is None else frame_layout(capacity, K)[1] + spare
    buf = FrameStackReplay(capacity, SPEC, seed=5, frames=frames)
    for piece in pieces(first, [50, 100, 150, 200]):
        buf.add_batch(piece)
    if spare:
        assert buf.written > buf.frames_capacity and len(buf) < capacity  # both rings wrapped
    else:
        assert buf.stacks[buf.live_slots()].min() < buf.written - buf.window
    copy = FrameStackReplay(capacity, SPEC, seed=0, frames=frames)
    copy.load_state_dict(buf.state_dict())
    assert_rows_equal(copy.rows(copy.live_slots()), buf.rows(buf.live_slots()))
    assert_rows_equal(copy.sample(32), buf.sample(32))
    copy.add_batch(rest)
    buf.add_batch(rest)
    assert (copy.pos, len(copy), copy.written) == (buf.pos, len(buf), buf.written)
    assert_rows_equal(copy.rows(copy.live_slots()), buf.rows(buf.live_slots()))
    assert_consistent(copy)


def test_load_state_dict_refuses_another_buffers_state():
    batch, _, _ = rollout(3, 30)
    frames = frame_layout(60, K)[1] + 40
    buf, copy = (FrameStackReplay(60, SPEC, frames=frames) for _ in range(2))
    buf.add_batch(batch)
    with pytest.raises(ValueError, match="capacity 60, this run's buffer_size is 61"):
        FrameStackReplay(61, SPEC, frames=frames).load_state_dict(buf.state_dict())
    with pytest.raises(ValueError, match=rf"state\['frames_capacity'\]={frames} is not this"):
        FrameStackReplay(60, SPEC).load_state_dict(buf.state_dict())
    plain = ReplayBuffer(60, SPEC)
    plain.add_batch(batch)
    with pytest.raises(ValueError, match=r"lacks \['stacks', 'born'\]"):
        copy.load_state_dict(plain.state_dict())
    broken = {**buf.state_dict(), "frames": torch.zeros(3, H, W, dtype=torch.uint8)}
    with pytest.raises(ValueError, match=r"state\['frames'\].shape.*Fix: pass what state_dict"):
        copy.load_state_dict(broken)


@pytest.mark.parametrize("build,error,match", [
    (lambda: FrameStackReplay(10, 4), ValueError,
     r"obs_dim=4 is not an ObsSpec of frame stacks.*Fix: pass ObsSpec\(\(K, H, W\)"),
    (lambda: FrameStackReplay(10, ObsSpec((84, 84, 4), np.dtype(np.uint8))), ValueError,
     r"obs_dim.shape=\(84, 84, 4\) holds its channels last.*Fix: pass ObsSpec"),
    (lambda: FrameStackReplay(0, SPEC), ValueError, "capacity=0"),
    (lambda: FrameStackReplay(10, SPEC, frames=135), ValueError, r"frames=135.*>= 136"),
    (lambda: FrameStackReplay(10, SPEC).add_batch(Batch(
        np.zeros((2, K, H, W), np.float32), *rollout(1, 2)[0][1:])), ValueError,
     "batch.obs.dtype='float32' is a float copy of frames this buffer keeps as uint8"),
    (lambda: FrameStackReplay(10, SPEC).add_batch(Batch(
        *rollout(1, 2)[0][:3], np.zeros((2, K, H, H), np.uint8), np.zeros(2, np.float32))),
     ValueError, r"batch.next_obs.shape=\(2, 4, 3, 3\) must be \(2, 4, 3, 5\)"),
    (lambda: FrameStackReplay(10, SPEC, n_step=True).add_batch(rollout(1, 3)[0]), TypeError,
     "FrameStackReplay.add_batch takes a NStepBatch.*Fix: pass an NStepBatch if n_step"),
    (lambda: FrameStackReplay(10, SPEC).add(np.zeros((K, H)), 0, 0.0, np.zeros((K, H, W)),
                                            False), ValueError, r"obs.shape=\(4, 3\)"),
    (lambda: FrameStackReplay(10, SPEC).sample(4), ValueError,
     "empty FrameStackReplay. Fix: add transitions first"),
    (lambda: FrameStackReplay(10**9, ObsSpec((4, 84, 84), np.dtype(np.uint8))), ValueError,
     r"buffer_size=1000000000 \(frames kept once\) would need"),
])
def test_bad_input_is_refused_naming_the_field_and_the_fix(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize("action_dim,n_step,frames", [(None, False, None), (3, True, None),
                                                      (None, True, 200)])
def test_the_memory_figure_is_what_is_allocated(action_dim, n_step, frames):
    buf = FrameStackReplay(50, SPEC, action_dim, n_step=n_step, frames=frames)
    allocated = sum(a.nbytes for a in vars(buf).values() if isinstance(a, np.ndarray))
    assert allocated == frame_replay_bytes(50, SPEC, action_dim, n_step, frames)


def test_a_million_atari_transitions_fit_in_8_gib():
    atari = ObsSpec((4, 84, 84), np.dtype(np.uint8))
    frame_bytes = frame_replay_bytes(1_000_000, atari, None, n_step=True)
    print(f"1M Atari transitions: {frame_bytes / 2**30:.2f} GiB kept once, "
          f"{replay_bytes(1_000_000, atari, None) / 2**30:.2f} GiB in a ReplayBuffer")
    assert frame_bytes <= 8 * 2**30
    assert frame_bytes < replay_bytes(1_000_000, atari, None) / 7
