"""Checkpoints without Ray: state round trips, resume arithmetic, and the refusals."""

import copy
import dataclasses
import signal
import threading
import time

import numpy as np
import pytest
import torch

from conftest import assert_same_tree, stop_pressed_twice

from rlkit.algos.dqn import DQNConfig, DQNLearner
from rlkit.algos.impala import IMPALAConfig
from rlkit.algos.ppo import PPOConfig
from rlkit.algos.sac import SACConfig, SACLearner
from rlkit.core.common import next_multiple, resumed_updates_due, updates_due
from rlkit.core.metrics import History
from rlkit.core.types import Batch
from rlkit.replay.buffers import ReplayBuffer, TensorReplayBuffer
from rlkit.train import train_dqn, train_sac
from rlkit.train.impala import train_impala
from rlkit.train.ppo import train_ppo
from rlkit.train.checkpoint import load_checkpoint, save_checkpoint
from rlkit.train.interrupts import interrupts_deferred

CFG = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=200, total_steps=1000,
                eval_every=500, eval_episodes=2, target_return=None)


def _batch(n, obs_dim=4, action_dim=None, start=0):
    obs = np.arange(start, start + n * obs_dim, dtype=np.float32).reshape(n, obs_dim)
    actions = (np.arange(n) % 2 if action_dim is None
               else np.full((n, action_dim), 0.5, np.float32))
    return Batch(obs, actions, np.arange(n, dtype=np.float32), obs + 1,
                 (np.arange(n) % 3 == 0).astype(np.float32))


@pytest.mark.parametrize("make", [lambda: ReplayBuffer(8, 4, None, seed=3),
                                  lambda: TensorReplayBuffer(8, 4, 2, "cpu", seed=3)])
def test_buffer_state_round_trip_keeps_rows_position_and_sampling_stream(make):
    a = make()
    a.add_batch(_batch(11, action_dim=None if isinstance(a, ReplayBuffer) else 2))  # wraps
    b = make()
    b.load_state_dict(a.state_dict())
    assert (len(b), b.pos) == (8, 3)
    for x, y in zip(a.sample(5), b.sample(5)):  # same rows and the same next random draw
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_buffer_state_refuses_another_capacity():
    a = ReplayBuffer(8, 4)
    a.add_batch(_batch(3))
    with pytest.raises(ValueError, match="buffer_size is 16. Fix: set buffer_size=8"):
        ReplayBuffer(16, 4).load_state_dict(a.state_dict())


def test_learner_states_round_trip_including_the_optimiser():
    torch.manual_seed(0)
    a, b = DQNLearner(4, 2, CFG), DQNLearner(4, 2, CFG)
    buffer = ReplayBuffer(100, 4)
    buffer.add_batch(_batch(100))
    for _ in range(3):
        a.update(buffer.sample(16))
    # a checkpoint is a copy (it went through a file or Ray): without one, the optimiser's
    # loaded moments would alias the original's
    b.load_state_dict(copy.deepcopy(a.state_dict()))
    batch = buffer.sample(16)
    assert b.updates == 3
    # the same next update (Adam's moments included) gives the same weights
    a.update(batch), b.update(batch)
    for k, v in a.get_weights().items():
        np.testing.assert_array_equal(v, b.get_weights()[k])

    cfg = SACConfig(hidden=(16, 16), batch_size=8)
    s1 = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), cfg)
    s2 = SACLearner(3, 1, np.array([-2.0]), np.array([2.0]), cfg)
    tb = TensorReplayBuffer(50, 3, 1)
    tb.add_batch(_batch(50, 3, 1))
    s1.update(tb.sample(8))
    s2.load_state_dict(copy.deepcopy(s1.state_dict()))
    assert s2.updates == 1 and torch.equal(s1.log_alpha, s2.log_alpha)
    # the same next update (same batch, same actor noise) from both: every network, the
    # temperature and the three optimisers' moments must have come across
    sac_batch = tb.sample(8)
    for learner in (s1, s2):
        torch.manual_seed(1)
        learner.update(sac_batch)
    for p1, p2 in zip([*s1.actor.parameters(), *s1.critic.parameters(),
                       *s1.critic_target.parameters(), s1.log_alpha],
                      [*s2.actor.parameters(), *s2.critic.parameters(),
                       *s2.critic_target.parameters(), s2.log_alpha], strict=True):
        torch.testing.assert_close(p1, p2, rtol=0, atol=0)


def test_resumed_update_schedule_by_hand():
    # a checkpoint at 1000 env steps after 400 updates; learning_starts=200, train_every=2
    # fresh: (steps // 2) - (200 // 2)
    assert resumed_updates_due(1000, 200, 2) == updates_due(1000, 200, 2) == 400
    # buffer restored: the same rate from where it stopped
    assert resumed_updates_due(1010, 200, 2, 1000, 400, kept_buffer=True) == 405
    # no buffer: refill 200 transitions first, then one update per 2 steps
    assert resumed_updates_due(1200, 200, 2, 1000, 400, kept_buffer=False) == 400
    assert resumed_updates_due(1210, 200, 2, 1000, 400, kept_buffer=False) == 405
    assert next_multiple(1000, 500) == 1500 and next_multiple(999, 500) == 1000


def test_single_process_resume_continues_the_run(tmp_path):
    first = train_dqn(CFG, checkpoint_dir=tmp_path, checkpoint_every=100)
    assert first.checkpoint == tmp_path / "checkpoint.pt" and first.learner.updates == 400
    saved = load_checkpoint(tmp_path, "DQN", CFG)
    assert (saved.env_steps, saved.updates, saved.buffer["size"]) == (1000, 400, 1000)

    more = dataclasses.replace(CFG, total_steps=2000)  # a bigger budget is allowed
    second = train_dqn(more, resume_from=tmp_path, checkpoint_dir=tmp_path)
    h1, h2 = first.history, second.history
    assert second.env_steps == 2000 and second.learner.updates == 900
    # the curve continues: the first run's history is a prefix of the resumed one
    assert h2.episode_returns[:len(h1.episode_returns)] == h1.episode_returns
    assert h2.eval_steps == [500, 1000, 1500, 2000]
    assert min(h2.episode_steps[len(h1.episode_steps):]) > 1000
    assert h2.episode_seconds[len(h1.episode_seconds)] >= h1.episode_seconds[-1]
    assert any("resumed from" in e for e in h2.events)


def test_a_field_added_since_a_checkpoint_counts_as_its_default(tmp_path):
    """A checkpoint written before ``shared_encoder`` existed (its config lacks the key) resumes
    a config at the default, and is refused, naming the field, by one that shares the encoder:
    loading two conv nets' weights into one would overwrite one with the other silently."""
    from rlkit.core.common import config_dict, with_added_fields

    config = PPOConfig()
    path = save_checkpoint(tmp_path, "PPO", config, {"updates": 3}, None, 100, 1.0, History())
    data = torch.load(path, weights_only=False)
    del data["config"]["shared_encoder"], data["digest"]  # as an earlier version wrote it
    torch.save(data, path)
    with pytest.warns(UserWarning, match="has no digest"):
        assert load_checkpoint(tmp_path, "PPO", config).env_steps == 100
    with pytest.warns(UserWarning, match="has no digest"), pytest.raises(
            ValueError, match=r"was trained with shared_encoder=False, but this config has "
                              r"shared_encoder=True.*Fix"):
        load_checkpoint(tmp_path, "PPO", dataclasses.replace(config, shared_encoder=True))
    recorded = {k: v for k, v in config_dict(config).items() if k != "shared_encoder"}
    assert with_added_fields(recorded, config) == config_dict(config)
    assert with_added_fields({**recorded, "gamma": 0.5}, config) != config_dict(config)


def test_resume_refusals_name_the_problem(tmp_path):
    history = History()
    learner = DQNLearner(4, 2, CFG)
    save_checkpoint(tmp_path, "DQN", CFG, learner.state_dict(), None, 100, 1.0, history)
    with pytest.raises(ValueError, match="holds a DQN checkpoint, but this run trains SAC"):
        load_checkpoint(tmp_path, "SAC", SACConfig())
    with pytest.raises(ValueError, match=r"hidden=\[32, 32\], but this config has "
                                         r"hidden=\[64, 64\]"):
        load_checkpoint(tmp_path, "DQN", dataclasses.replace(CFG, hidden=(64, 64)))
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        load_checkpoint(tmp_path / "nowhere", "DQN", CFG)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable rlkit checkpoint"):
        load_checkpoint(tmp_path / "junk.pt", "DQN", CFG)


def test_an_interrupt_inside_the_bookkeeping_is_delivered_when_it_ends():
    # Python's own Ctrl-C handler, whatever this process inherited: a job a shell starts in the
    # background has SIGINT ignored, and an ignored signal is (rightly) never delivered
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _deliver_an_interrupt_after_the_block()
    finally:
        signal.signal(signal.SIGINT, inherited)


def _deliver_an_interrupt_after_the_block():
    before = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            # raise_signal, not os.kill: the signal goes to this thread at once, so Python's
            # handler runs within the sleep however loaded the machine is
            signal.raise_signal(signal.SIGINT)
            time.sleep(0.05)
            done.append("the rest of the block")  # ... and did not cut it short
    assert done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler is back
    with interrupts_deferred():  # no interrupt: nothing raised
        done.append("again")
    assert signal.getsignal(signal.SIGINT) is before


def test_interrupts_deferred_is_a_no_op_off_the_main_thread():
    errors = []

    def body():
        try:
            with interrupts_deferred():
                pass  # signal.signal would raise ValueError here
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert errors == []


def test_an_optimizer_keeps_its_own_runtime_flags_when_loading_a_checkpoint():
    # a checkpoint written by a differently configured optimiser (a CPU run's Adam, say) must not
    # switch this one's capturable/fused/foreach settings: they say how this process runs
    from rlkit.core.networks import load_optimizer_state

    net = torch.nn.Linear(3, 2)
    other = torch.optim.Adam(net.parameters(), lr=1e-3, foreach=True)
    net(torch.ones(4, 3)).sum().backward()
    other.step()
    saved = copy.deepcopy(other.state_dict())
    mine = torch.optim.Adam(net.parameters(), lr=1e-3, foreach=False)
    load_optimizer_state(mine, saved)
    assert mine.param_groups[0]["foreach"] is False  # torch alone would have taken True
    assert mine.param_groups[0]["lr"] == 1e-3
    for p in net.parameters():  # the training state itself was loaded
        torch.testing.assert_close(mine.state[p]["exp_avg"], other.state[p]["exp_avg"])
    assert saved["param_groups"][0]["foreach"] is True  # the checkpoint is left untouched


def test_loading_a_live_optimizers_state_copies_it_instead_of_sharing_it():
    # torch keeps a tensor of the right device and dtype as it is: without the copy, the two
    # optimisers would share their moments, and each step of one would move the other
    from rlkit.core.networks import load_optimizer_state

    nets = [torch.nn.Linear(3, 2) for _ in range(2)]
    source, loaded = (torch.optim.Adam(n.parameters(), lr=1e-3) for n in nets)
    nets[0](torch.ones(4, 3)).sum().backward()
    source.step()
    load_optimizer_state(loaded, source.state_dict())
    before = {k: v.clone() for k, v in source.state[nets[0].weight].items()}
    nets[1](torch.ones(4, 3)).sum().backward()
    loaded.step()
    for key, value in source.state[nets[0].weight].items():
        torch.testing.assert_close(value, before[key])  # the source did not move
    assert not torch.equal(loaded.state[nets[1].weight]["exp_avg"], before["exp_avg"])


def test_a_sampling_stream_saved_on_another_device_kind_is_reseeded():
    rng = np.random.default_rng(0)
    buffer = TensorReplayBuffer(64, 3, 1, "cpu")
    buffer.add_batch(Batch(rng.normal(size=(10, 3)).astype(np.float32),
                           rng.normal(size=(10, 1)).astype(np.float32),
                           np.ones(10, np.float32), rng.normal(size=(10, 3)).astype(np.float32),
                           np.zeros(10, np.float32)))
    state = buffer.state_dict()
    assert state["generator_device"] == "cpu"
    same = TensorReplayBuffer(64, 3, 1, "cpu")
    same.load_state_dict(state)  # same kind: the stream continues exactly
    torch.testing.assert_close(same.sample(8).obs, buffer.sample(8).obs)
    # as a GPU run would have saved it: a CUDA generator's state (16 bytes), not a CPU one's
    gpu_state = {**state, "generator": torch.zeros(16, dtype=torch.uint8),
                 "generator_device": "cuda"}
    other = TensorReplayBuffer(64, 3, 1, "cpu")
    other.load_state_dict(gpu_state)  # no "wrong size" error: reseeded instead
    assert len(other) == 10 and other.sample(8).obs.shape == (8, 3)


def _small_checkpoint(folder):
    learner = DQNLearner(4, 2, CFG)
    buffer = ReplayBuffer(64, 4, seed=0)
    buffer.add_batch(_batch(32))
    return save_checkpoint(folder, "DQN", CFG, learner.state_dict(), buffer.state_dict(), 32,
                           1.5, History())


def test_a_checkpoint_damaged_after_it_was_saved_is_refused_before_use(tmp_path):
    """torch does not check its archive's CRC: 64 bytes flipped inside a tensor's data load
    without complaint. The digest written with the file catches them, and a file changed and
    saved again without its digest; the untouched file loads."""
    import zipfile

    path = _small_checkpoint(tmp_path)
    assert load_checkpoint(path, "DQN", CFG).env_steps == 32
    with zipfile.ZipFile(path) as archive:  # the largest tensor's bytes inside the archive
        info = max((i for i in archive.infolist() if "/data/" in i.filename),
                   key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    start = info.header_offset  # the entry's local header: 30 bytes, its name, its extra field
    name_len, extra_len = int.from_bytes(raw[start + 26:start + 28], "little"), \
        int.from_bytes(raw[start + 28:start + 30], "little")
    data = start + 30 + name_len + extra_len + info.file_size // 2
    raw[data:data + 64] = bytes(b ^ 0xFF for b in raw[data:data + 64])
    damaged = tmp_path / "damaged.pt"
    damaged.write_bytes(bytes(raw))
    torch.load(damaged, weights_only=True)  # torch itself reads it without a word
    with pytest.raises(ValueError, match=r"does not match the digest written with it.*Fix:"):
        load_checkpoint(damaged, "DQN", CFG)

    payload = torch.load(path, weights_only=True)
    payload["env_steps"] = 999  # edited, saved again with the old digest
    torch.save(payload, tmp_path / "edited.pt")
    with pytest.raises(ValueError, match=r"does not match the digest"):
        load_checkpoint(tmp_path / "edited.pt", "DQN", CFG)
    del payload["digest"]  # a checkpoint from before digests: still loads, with a warning
    torch.save(payload, tmp_path / "old.pt")
    with pytest.warns(UserWarning, match=r"old.pt has no digest.*loaded unchecked. Fix: once "
                                         r"resumed, save it again"):
        assert load_checkpoint(tmp_path / "old.pt", "DQN", CFG).env_steps == 999


def test_a_torch_file_without_rlkits_keys_is_named_not_a_checkpoint(tmp_path):
    torch.save({"format": 1, "learner": {}}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"is not an rlkit checkpoint \(format 1; it lacks "
                                         r"\['algorithm', 'config', 'buffer'.*Fix:"):
        load_checkpoint(tmp_path / "other.pt", "DQN", CFG)


@pytest.mark.parametrize("folder", ["/proc/rlkit_checkpoints", "x" * 300])
def test_a_checkpoint_dir_that_cannot_be_written_is_refused_before_training(tmp_path, folder):
    from rlkit.train.checkpoint import check_checkpoint_options

    with pytest.raises(ValueError, match=r"checkpoint_dir=.* cannot be written \(\w+Error: .*"
                                         r"Fix: pass a folder you can write to"):
        check_checkpoint_options(str(tmp_path / folder) if not folder.startswith("/") else
                                 folder, 10, None)
    check_checkpoint_options(tmp_path / "fine", 10, None)
    assert (tmp_path / "fine").is_dir() and list((tmp_path / "fine").iterdir()) == []


def _assert_same_run(a, b):
    """The same run: counts, learner (networks and optimiser), buffer (rows and sampling
    stream), envs, random streams, and the history's steps, returns and losses. Only the
    seconds and the resume's own event may differ."""
    assert (a.env_steps, a.updates) == (b.env_steps, b.updates)
    for part in ("learner", "buffer", "run_state"):
        assert_same_tree(getattr(a, part), getattr(b, part), part)
    for field in ("episode_steps", "episode_returns", "eval_steps", "eval_returns", "eval_stds",
                  "loss_steps", "losses"):
        assert getattr(a.history, field) == getattr(b.history, field), field


SAC_CFG = SACConfig(hidden=(16, 16), batch_size=8, learning_starts=100, total_steps=700,
                    eval_every=350, eval_episodes=1, target_return=None)
ON_POLICY = dict(num_workers=2, envs_per_worker=2, batch_fragments=2, unroll_length=32,
                 total_steps=1_280, eval_every=640, eval_episodes=1, target_return=None)
RESUMES = {  # name: (run(config, **options), config, checkpoint's algorithm, updates between
    #               checkpoints, which checkpoint of the uninterrupted run the resume starts from)
    "dqn": (train_dqn, CFG, "DQN", 100, 1),
    "dqn-3-step": (train_dqn, dataclasses.replace(CFG, n_step=3), "DQN", 100, 1),
    "sac": (train_sac, SAC_CFG, "SAC", 100, 1),
    "impala-lag-1": (lambda c, **o: train_impala(c, policy_lag=1, **o),
                     IMPALAConfig(**ON_POLICY), "IMPALA", 3, 1),
    "ppo": (train_ppo, PPOConfig(**ON_POLICY), "PPO", 3, 1),
}


@pytest.mark.parametrize("name", list(RESUMES))
def test_a_run_resumed_mid_episode_is_bit_identical_to_the_run_never_stopped(
        tmp_path, monkeypatch, name):
    """Issue 38: a periodic checkpoint taken inside an episode, resumed, ends where the
    uninterrupted run ends, for every one-process trainer. Every checkpoint the uninterrupted
    run writes is copied aside; the resume starts from one of them."""
    import shutil

    from rlkit.train import checkpoint as checkpoint_module

    train, config, algo, every, which = RESUMES[name]
    copies, save = [], checkpoint_module.save_checkpoint

    def save_and_copy(folder, *args, **kwargs):
        path = save(folder, *args, **kwargs)
        copies.append(shutil.copy(path, tmp_path / f"copy_{len(copies)}.pt"))
        return path

    monkeypatch.setattr(checkpoint_module, "save_checkpoint", save_and_copy)
    train(config, checkpoint_dir=tmp_path / "whole", checkpoint_every=every)
    start = load_checkpoint(copies[which], algo, config)
    runners = start.run_state.get("runners") or [start.run_state["runner"]]
    assert any(r["episode_length"].max() > 0 for r in runners)  # inside an episode
    resumed = train(config, resume_from=copies[which], checkpoint_dir=tmp_path / "resumed",
                    checkpoint_every=every)
    assert f"step {start.env_steps}: resumed from" in resumed.history.events[-1]
    assert "exactly where it stopped" in resumed.history.events[-1]
    _assert_same_run(load_checkpoint(tmp_path / "whole", algo, config),
                     load_checkpoint(tmp_path / "resumed", algo, config))


def test_a_run_stopped_by_ctrl_c_mid_episode_resumes_into_the_run_never_stopped(
        tmp_path, monkeypatch):
    """A Ctrl-C arriving inside a step (here: while the policy chooses the action of env step
    701) is taken when the step's bookkeeping ends, so its checkpoint is a consistent one and the
    resumed run ends where the uninterrupted run ends, with the losses not yet logged kept."""
    from rlkit.algos.dqn import DQNSpec

    config = dataclasses.replace(CFG, n_step=3)
    whole = train_dqn(config, checkpoint_dir=tmp_path / "whole")
    make_policy, calls = DQNSpec.exploration_policy, []

    def interrupting(self, *args):
        policy = make_policy(self, *args)

        def act(obs):
            calls.append(1)
            if len(calls) == 701:
                signal.raise_signal(signal.SIGINT)  # to this thread, at once
            return policy(obs)
        return act

    monkeypatch.setattr(DQNSpec, "exploration_policy", interrupting)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            train_dqn(config, checkpoint_dir=tmp_path / "stopped")
    finally:
        signal.signal(signal.SIGINT, inherited)
    stopped = load_checkpoint(tmp_path / "stopped", "DQN", config)
    assert stopped.env_steps == 702  # the step in progress (train_every=2) was finished
    assert stopped.run_state["runner"]["episode_length"].item() > 0
    assert stopped.run_state["losses"]  # losses not yet logged at the stop travel with it
    monkeypatch.undo()
    resumed = train_dqn(config, resume_from=tmp_path / "stopped",
                        checkpoint_dir=tmp_path / "stopped")
    assert resumed.env_steps == whole.env_steps
    _assert_same_run(load_checkpoint(tmp_path / "whole", "DQN", config),
                     load_checkpoint(tmp_path / "stopped", "DQN", config))


def test_a_second_ctrl_c_while_the_checkpoint_is_written_waits_for_it(tmp_path, monkeypatch,
                                                                      capsys):
    """A person who presses stop twice: the second SIGINT arrives inside ``torch.save`` of the
    interrupt's checkpoint. The file is still written whole (it loads), the second press is
    answered at once, the run stops with one ``KeyboardInterrupt`` and the handler is back."""
    import rlkit.train.checkpoint as checkpoint_module

    real_save, saves = checkpoint_module.torch.save, []

    def save_pressed_twice(*args, **kwargs):
        saves.append(1)
        signal.raise_signal(signal.SIGINT)  # the second press, mid-save, to this thread
        time.sleep(0.05)  # (a Python handler runs within the sleep, however loaded the machine)
        return real_save(*args, **kwargs)

    def first_press(self, *args):
        raise KeyboardInterrupt  # the first press, at the first logged episode

    monkeypatch.setattr(History, "log_episode", first_press)
    monkeypatch.setattr(checkpoint_module.torch, "save", save_pressed_twice)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            train_dqn(CFG, checkpoint_dir=tmp_path)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)
    monkeypatch.undo()
    out = capsys.readouterr().out
    assert saves == [1]
    assert "still saving the checkpoint" in out and "checkpoint saved to" in out, out
    assert load_checkpoint(tmp_path, "DQN", CFG).env_steps > 0


@pytest.mark.parametrize("gap_ms", [0, 5, 20, 50, 100, 300])
def test_two_presses_of_stop_leave_a_checkpoint_that_loads_or_say_none_was_saved(
        tmp_path, monkeypatch, capsys, gap_ms):
    """Stop pressed twice, ``gap_ms`` apart, while one-process DQN saves its checkpoint (made
    to take 0.4 s: :func:`conftest.stop_pressed_twice`): the checkpoint is written and loads, or
    a printed line says none was saved (before the fix, the second press lost it without a
    word). The same for a Ray run: tests/test_faults.py."""
    stop_pressed_twice(monkeypatch, gap_ms, lambda: train_dqn(CFG, checkpoint_dir=tmp_path))
    out = capsys.readouterr().out
    if "checkpoint saved to" in out:
        assert load_checkpoint(tmp_path, "DQN", CFG).env_steps > 0
    else:
        assert "no checkpoint saved" in out, out


def test_a_second_interrupt_that_stops_the_save_says_no_checkpoint_was_saved(capsys):
    """Off the main thread no handler can hold the second interrupt: the save stops, and the
    message says so instead of nothing."""
    from rlkit.train.interrupts import save_on_interrupt

    def save():
        raise KeyboardInterrupt  # the second press, mid-save

    with pytest.raises(KeyboardInterrupt):
        with save_on_interrupt(save, lambda: 5):
            raise KeyboardInterrupt
    assert "interrupted again while saving; no checkpoint saved" in capsys.readouterr().out


def test_a_checkpoint_whose_tensors_do_not_fit_the_networks_is_refused_with_the_fix(tmp_path):
    """Issue 38: torch's size-mismatch error became one that names resume_from and the fix,
    raised before a step is trained (one process here; the Ray roles load through the same
    load_learner_state)."""
    from rlkit.train.integrity import content_digest

    train_dqn(CFG, checkpoint_dir=tmp_path)
    payload = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    del payload["digest"]
    first = next(iter(payload["learner"]["q"]))
    payload["learner"]["q"][first] = torch.zeros(3, 3)  # edited, digest and all
    payload["digest"] = content_digest(payload)
    torch.save(payload, tmp_path / "edited.pt")
    with pytest.raises(ValueError, match=r"resume_from: the checkpoint's learner state does not "
                                         r"fit this run's learner \(RuntimeError: .*size "
                                         r"mismatch.*Fix: resume with the config"):
        train_dqn(CFG, resume_from=tmp_path / "edited.pt")


@pytest.mark.parametrize("name", ["dqn", "ppo"])
def test_an_env_whose_state_cannot_be_copied_checkpoints_and_resumes_with_new_episodes(
        tmp_path, name):
    """LunarLander keeps a Box2D world: the checkpoint is written without the envs (it does not
    fail), and its resume starts new episodes, saying why."""
    if name == "dqn":
        config = dataclasses.replace(CFG, env_id="LunarLander-v3", total_steps=400,
                                     eval_every=400, eval_episodes=1)
        train = train_dqn
    else:
        config = PPOConfig(**{**ON_POLICY, "num_workers": 1, "total_steps": 256,
                              "eval_every": 256, "env_id": "LunarLander-v3"})
        train = train_ppo
    first = train(config, checkpoint_dir=tmp_path)
    state = load_checkpoint(tmp_path, name.upper(), config).run_state
    assert "b2World, which rlkit cannot save" in state["unsupported"]
    more = train(dataclasses.replace(config, total_steps=2 * config.total_steps),
                 resume_from=tmp_path)
    assert more.env_steps > first.env_steps
    assert "new episodes and exploration stream: env.envs[0]" in more.history.events[-1]
