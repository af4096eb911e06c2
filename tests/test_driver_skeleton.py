"""The one driver skeleton: the options every driver shares, checked before any actor starts,
and the same role vocabulary and result base in the four patterns."""

import dataclasses
import math

import pytest

from rlkit.algos.a2c import A2CConfig
from rlkit.algos.apex import ApexConfig, ApexDQN
from rlkit.algos.dqn import DQNConfig
from rlkit.algos.impala import IMPALAConfig
from rlkit.distributed.runtime.options import RunOptions

from conftest import wait_until_no_actors


@pytest.mark.parametrize("kwargs,match", [
    (dict(timeout_s=0), r"timeout_s=0 must be a finite number >= 1 \(seconds\). Fix:"),
    (dict(timeout_s=math.nan), r"timeout_s=nan must be a finite number >= 1"),
    (dict(timeout_s=True), r"timeout_s=True must be a finite number >= 1 \(seconds\) \(got a "
                           r"bool\)"),
    (dict(timeout_s="60"), r"timeout_s='60' must be a finite number >= 1 \(seconds\) "
                           r"\(got a str"),
    (dict(max_restarts=-1), r"max_restarts=-1 must be an int >= 0. Fix:"),
    (dict(max_restarts=2.5), r"max_restarts=2.5 must be an int >= 0"),
    (dict(progress="yes"), r"progress='yes' must be True or False"),
    (dict(kill_at=[("worker 0", 5)]), r"kill_at=.* must be a dict \{role name: env steps >= "
                                      r"0\}. Fix:"),
    (dict(kill_at={"worker 0": -5}), r"must be a dict \{role name: env steps >= 0\}. Fix:"),
    (dict(kill_at={"worker 0": 2.0}), r"must be a dict \{role name: env steps >= 0\}. Fix:"),
])
def test_run_options_refuse_bad_values_naming_the_field_and_the_fix(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RunOptions(**kwargs)


def test_run_options_keep_their_own_copy_of_kill_at():
    plan = {"worker 0": 100}
    options = RunOptions(kill_at=plan)
    plan["learner"] = 5
    assert options.kill_at == {"worker 0": 100}


SMALL_DQN = DQNConfig(hidden=(16,), batch_size=16, learning_starts=100, total_steps=400,
                      eval_every=200, eval_episodes=1, target_return=None)


def _drivers():
    from rlkit.distributed.a3c.driver import train_a2c_ray, train_a3c_ray
    from rlkit.distributed.apex.driver import train_apex_ray
    from rlkit.distributed.impala.driver import train_impala_ray
    from rlkit.distributed.off_policy.driver import train_dqn_ray

    return {
        "off-policy": lambda **o: train_dqn_ray(dataclasses.replace(SMALL_DQN, num_workers=1),
                                                **o),
        "apex": lambda **o: train_apex_ray(ApexDQN(dataclasses.replace(
            SMALL_DQN, num_workers=1, envs_per_worker=4, fragment_steps=64),
            ApexConfig(num_shards=1)), **o),
        "a3c": lambda **o: train_a3c_ray(A2CConfig(num_workers=1), **o),
        "a2c": lambda **o: train_a2c_ray(A2CConfig(num_workers=1), **o),
        "impala": lambda **o: train_impala_ray(IMPALAConfig(num_workers=1), **o),
    }


def test_every_driver_is_called_the_same_way():
    """One entry shape (issue 39): a Ray driver takes its config (the spec-level drivers,
    ``train_ray`` and ``train_apex_ray``, the algorithm that holds it) and ``**options``, the
    run options; the workers' count and shape live in the config. The one-process trainers
    take the config and their options by keyword."""
    import inspect

    from rlkit.distributed.a3c import driver as a3c
    from rlkit.distributed.apex import driver as apex
    from rlkit.distributed.impala import driver as impala
    from rlkit.distributed.off_policy import driver as off_policy
    from rlkit.train import impala as one_impala
    from rlkit.train import loop, ppo

    def shape(fn):
        return [(p.name if p.kind is not p.VAR_KEYWORD else "**", p.kind)
                for p in inspect.signature(fn).parameters.values()]

    drivers = {name: getattr(module, name) for module in (a3c, apex, impala, off_policy)
               for name in dir(module) if name.startswith("train_") and name.endswith("ray")}
    assert sorted(drivers) == ["train_a2c_ray", "train_a3c_ray", "train_apex_ray",
                               "train_appo_ray", "train_dqn_ray", "train_impala_ray",
                               "train_ppo_ray", "train_ray", "train_sac_ray"]
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    for name, fn in drivers.items():
        first = "algo" if name in ("train_ray", "train_apex_ray") else "config"
        assert shape(fn) == [(first, positional), ("**", inspect.Parameter.VAR_KEYWORD)], name
    for fn in (loop.train_dqn, loop.train_sac, ppo.train_ppo):
        assert shape(fn) == [("config", positional), ("**", inspect.Parameter.VAR_KEYWORD)]
    assert all(kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
               for _, kind in shape(one_impala.train_impala)[1:])


@pytest.mark.ray
@pytest.mark.parametrize("pattern", ["off-policy", "apex", "a3c", "a2c", "impala"])
def test_every_driver_takes_the_same_options_and_refuses_before_any_actor(ray_cluster,
                                                                         pattern):
    """The same option names in every driver; a fault plan naming a role the run does not
    start ("actor 0", the old IMPALA word) is refused with the run's own role names."""
    drive = _drivers()[pattern]
    with pytest.raises(ValueError, match=r"kill_at=\{'actor 0': 5\} names \['actor 0'\], "
                                         r"which this run does not start. Fix: use one of "
                                         r"\[.*'worker 0'"):
        drive(kill_at={"actor 0": 5})
    with pytest.raises(ValueError, match=r"timeout_s=-1 must be a finite number >= 1 \(sec"):
        drive(timeout_s=-1)
    with pytest.raises(TypeError, match=r"got an unknown option 'kill_worker_at'. Fix: did you "
                                        r"mean 'kill_at'\?"):
        drive(kill_worker_at=5)
    assert wait_until_no_actors(2.0) == []


class _Calls:
    """A stand-in for the supervisor: calls finish in the order they were launched."""

    def __init__(self):
        self.kill_at = {}

    def wait_one(self, refs, waiting_for):
        return refs[0]

    def inject_faults(self, env_steps):
        pass


@pytest.mark.ray
def test_the_loop_serves_the_oldest_ready_call_first(ray_cluster):
    """``wait_one`` returns the first ready ref in the order given (the driver passes its calls
    oldest first), not the arbitrary one ``ray.wait`` picks: with a worker's fragment always
    ready, an evaluation that had finished was left unread for 90 s (10,000 env steps of SAC
    on Ray, the run trained on past its solve). Twenty finished calls, shuffled ten times."""
    import random
    import time

    import ray

    from rlkit.core.metrics import History
    from rlkit.distributed.runtime.supervisor import Supervisor

    refs = [ray.put(i) for i in range(20)]
    ray.wait(refs, num_returns=len(refs))
    sup, rng = Supervisor(60.0, 3, History()), random.Random(0)
    for _ in range(10):
        rng.shuffle(refs)
        assert sup.wait_one(refs, lambda: ("nobody", "")) == refs[0]
    # an older call still running does not hold up a finished one
    running = ray.remote(lambda: time.sleep(60)).options(num_cpus=0).remote()
    assert sup.wait_one([running, refs[5]], lambda: ("nobody", "")) == refs[5]
    ray.cancel(running, force=True)


def test_a_solved_run_launches_nothing_more():
    """The loop, without Ray: every schedule launches a fragment, and an evaluation when none
    is in flight; the first evaluation solves, and nothing may be launched after it (a run
    seen once in CI scored a second snapshot after the solving one)."""
    from rlkit.distributed.runtime.driver import DriverRun

    class Run(DriverRun):
        def __init__(self):
            super().__init__(RunOptions(), total_steps=100, name="test", algorithm="test",
                             config=SMALL_DQN)
            self.supervisor = _Calls()
            self.evaluations, self.launched = [], 0

        def schedule(self):
            self.launched += 1
            self.expect(f"fragment {self.launched}", "worker 0", self.on_fragment)
            if not any(role == "evaluator" for role, _ in self.pending.values()):
                self.expect(f"eval {self.launched}", "evaluator", self.on_evaluation)

        def on_fragment(self, ref):
            self.env_steps += 1

        def on_evaluation(self, ref):
            self.evaluations.append(ref)
            self.log_evaluation(self.env_steps, 0.0, 500.0, 0.0, target=475.0)

        def done(self):
            return self.solved or self.env_steps >= self.total_steps

    run = Run()
    run.train()
    assert run.solved and run.evaluations == ["eval 1"]
    assert list(run.pending) == ["fragment 2"]  # launched before the solve; nothing after


def _three_fragments(options):
    """A run on the skeleton without Ray: each schedule asks worker 0 for a fragment (one env
    step); done after three; the fourth call is still in flight at the end."""
    from rlkit.distributed.runtime.driver import DriverRun

    class Run(DriverRun):
        def __init__(self):
            super().__init__(options, total_steps=3, name="test", algorithm="test",
                             config=SMALL_DQN)
            self.supervisor = _Calls()

        def schedule(self):
            self.expect(f"fragment {self.env_steps}", "worker 0", self.on_fragment)

        def on_fragment(self, ref):
            self.env_steps += 1

        def done(self):
            return self.env_steps >= self.total_steps

    run = Run()
    run.train()
    return run


def test_the_skeleton_records_a_span_per_call_and_per_event_it_handles():
    """Every launched call gets a span of its role from launch to answer, every handled answer
    a span of the driver; a call still in flight at the end is marked unfinished."""
    from rlkit.core.timeline import DRIVER, Span, busy_seconds

    run = _three_fragments(RunOptions())
    spans = run.timeline.timeline()
    calls = [s for s in spans if s.role == "worker 0"]
    assert [s.what for s in calls] == ["fragment"] * 4 and calls[-1].end is None  # in flight
    assert all(s.start <= s.end for s in spans if s.end is not None)
    assert [s.what for s in spans if s.role == DRIVER] == ["fragment"] * 3
    # the union of a role's spans, by hand: [0, 2] and [1, 3] overlap, [5, 6] does not
    hand = [Span("learner", "x", 0.0, 2.0), Span("learner", "x", 1.0, 3.0),
            Span("learner", "x", 5.0, 6.0), Span("worker 0", "x", 4.0, None)]
    assert busy_seconds(hand) == {"learner": 4.0}
    assert busy_seconds(hand, until=7.0) == {"learner": 4.0, "worker 0": 3.0}


def test_a_dropped_call_ends_where_it_was_given_up_not_at_the_end_of_the_run():
    """A learner group's calls in flight when it restarts are dropped: their spans end where
    the restart began, marked, so the timeline shows the restart as a gap (issue 41), not as a
    call in flight to the end of the run; other roles' calls are untouched."""
    from rlkit.core.timeline import TimelineRecorder

    now = iter([0.0, 1.0, 1.5, 4.0]).__next__
    recorder = TimelineRecorder(now)
    recorder.launched("a", "learner 0", "train")
    recorder.launched("b", "learner 1", "train")
    recorder.launched("c", "worker 0", "collect")
    recorder.dropped(["learner 0", "learner 1"], at=2.5)
    recorder.answered("c")
    assert [(s.role, s.what, s.start, s.end) for s in recorder.timeline()] == [
        ("learner 0", "train (dropped)", 0.0, 2.5), ("learner 1", "train (dropped)", 1.0, 2.5),
        ("worker 0", "collect", 1.5, 4.0)]


def test_a_run_with_timeline_off_records_nothing_and_still_runs():
    """``timeline=False`` (the overhead benchmark's control): the same loop, no spans."""
    run = _three_fragments(RunOptions(timeline=False))
    assert run.env_steps == 3 and run.timeline.timeline() == []


def test_a_long_runs_timeline_keeps_its_most_recent_spans():
    """Memory stays bounded: past ``max_spans`` the oldest closed spans go, and are counted."""
    from rlkit.core.timeline import TimelineRecorder

    ticks = iter(range(100)).__next__
    recorder = TimelineRecorder(lambda: float(ticks()), max_spans=3)
    for ref in range(4):
        recorder.launched(ref, "worker 0", "fragment")
        recorder.answered(ref)
    recorder.launched("open", "learner", "train")  # in flight: always kept
    spans = recorder.timeline()
    assert [(s.start, s.end) for s in spans] == [(2.0, 3.0), (4.0, 5.0), (6.0, 7.0), (8.0, None)]
    assert recorder.discarded == 1


def test_a_role_lost_with_its_node_is_named_with_every_role_that_node_took(monkeypatch):
    """A learner's node that dies takes the worker the plan put beside it: the error names the
    learner, its node, and the worker as lost with it; a worker on a node still alive is not
    named. (Ray's node table and actor table are stood in for: the arithmetic is the point.)"""
    from rlkit.core.metrics import History
    from rlkit.distributed.runtime import failures, supervisor
    from rlkit.distributed.runtime.placement import Node, ResourcePlan, Slot

    alive = Node("b" * 16, "10.0.0.2", 1.0)
    plan = ResourcePlan((Node("h" * 16, "10.0.0.1", 0.0, driver=True), alive),
                        {"learner": Slot("a" * 16, 0.5), "worker 0": Slot("a" * 16, 0.5),
                         "worker 1": Slot(alive.node_id, 1.0)})
    monkeypatch.setattr(failures, "cluster_nodes", lambda: list(plan.nodes))  # "a..." is gone
    monkeypatch.setattr(failures, "node_of", lambda handle: "node aaaaaaaa (10.0.0.9)")
    sup = supervisor.Supervisor(60.0, 3, History(), plan=plan)
    sup.handles = {"learner": object(), "worker 0": object(), "worker 1": object()}
    error = sup.failure(RuntimeError("its node died"), "learner", "training", dead=["learner"])
    assert str(error).startswith("the learner actor failed on node aaaaaaaa (10.0.0.9) while "
                                 "training (also lost: worker 0) (RuntimeError: its node died)")
    assert type(error).__name__ == "LearnerFailedError" and error.role == "learner"
    monkeypatch.setattr(failures, "cluster_nodes",
                        lambda: [*plan.nodes, Node("a" * 16, "10.0.0.9", 1.0)])
    assert "also lost" not in str(sup.failure(RuntimeError("x"), "learner", "training",
                                              dead=["learner"]))


def test_a_resumed_runs_roles_draw_new_random_streams():
    """Every pattern's workers are seeded by their incarnation (``worker_seed(seed, i,
    restart)``); a resumed run's incarnations start 1000 above the run it continues, so its
    workers never replay the first run's streams, while restarts still count from 0 against
    ``max_restarts``. (The factories stand in for actors: they return the number they get.)"""
    from rlkit.core.common import resume_generation, worker_seed
    from rlkit.core.metrics import History
    from rlkit.distributed.runtime import supervisor

    events = ["step 0: worker 0 failed (x); restarted (restart 1)", "step 900: resumed from a",
              "step 1800: resumed from b"]
    assert resume_generation([]) == 0 and resume_generation(events) == 2000
    sup = supervisor.Supervisor(60.0, 3, History())
    sup.incarnation_base = resume_generation(events)
    assert sup.start("worker 0", lambda restart: restart) == 2000
    assert sup.relaunch("worker 0") == 2001
    assert sup.restarts["worker 0"] == 1  # what max_restarts is held against
    seeds = {worker_seed(0, 0, r) for r in (0, 1, 1000, 1001, 2000)}
    assert len(seeds) == 5  # the first run, its restart, each resume: five streams
