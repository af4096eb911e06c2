"""The benchmark harness runs (shortest settings) and writes valid JSON. No timing asserted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.ray
def test_weight_sync_benchmark_writes_json(tmp_path):
    # RLKIT_BENCH_RESULTS sends the output to tmp_path: the committed full-run JSON is untouched
    committed = ROOT / "benchmarks" / "results" / "weight_sync.json"
    before = committed.read_bytes() if committed.exists() else None
    subprocess.run([sys.executable, "-m", "benchmarks.weight_sync", "--repeats", "3"],
                   cwd=ROOT, check=True, timeout=300, capture_output=True,
                   env={**os.environ, "RLKIT_BENCH_RESULTS": str(tmp_path)})
    data = json.loads((tmp_path / "weight_sync.json").read_text())
    assert data["machine"]["logical_cores"] >= 1
    assert set(data["results"]) == {"dqn q-network 256x256", "sac actor 256x256",
                                    "dqn q-network 128x128 (notebooks 01-02)",
                                    "sac actor 128x128 (notebook 03)"}
    for entry in data["results"].values():
        assert entry["bytes"] > 0 and entry["total_ms_median"] > 0
        assert entry["blocking_total_ms_median"] > 0
    assert (committed.read_bytes() if committed.exists() else None) == before


def test_lunar_settings_build_the_task_and_render_a_result():
    """benchmarks/lunar.py's settings are valid and its env is installed (Box2D, from the
    requirements); a hand-made result renders as the README's rows, an unsolved seed as "-".
    (The benchmark itself takes tens of minutes a seed: `make bench`, not `make test`.)"""
    from benchmarks.lunar import readme_lines
    from rlkit.algos.sac import LUNAR_LANDER
    from rlkit.envs.make import make_env, space_dims

    env = make_env(LUNAR_LANDER.env_id, LUNAR_LANDER.seed, "continuous", "SAC")
    assert space_dims(env) == (8, 2)
    env.close()
    assert LUNAR_LANDER.target_return == 200.0 and LUNAR_LANDER.eval_episodes == 10
    run = {"solved": True, "steps_to_solve": 150_000, "minutes_to_solve": 27.5,
           "learner_updates_per_second": 101.2, "device": "cpu", "eval_return": 231.4}
    data = {"machine": {"cpu": "a CPU", "logical_cores": 2, "gpu": None},
            "summary": {"seeds": 2, "solved": 1, "workers": 2, "total_steps": 200_000},
            "runs": {"0": run, "1": {**run, "solved": False, "steps_to_solve": None,
                                     "minutes_to_solve": None, "eval_return": 120.0}}}
    lines = readme_lines(data)
    assert "solved in 1 of 2 seeds" in lines[0] and "budget 200,000 env steps" in lines[0]
    assert lines[4] == "| 0 | True | 150,000 | 27.5 | 101 (cpu) | 231 |"
    assert lines[5] == "| 1 | False | - | - | 101 (cpu) | 120 |"


def test_apex_ablation_counts_the_seeds_that_reached_the_target_per_arm():
    """benchmarks/apex_ablation.py on hand-made runs: the median env steps to reach 475 counts
    only the seeds that reached it (none: "-"); the best evaluation is each seed's highest."""
    from benchmarks.apex_ablation import readme_lines, summarize

    runs = {"a": {"0": {"solved": True, "solved_at_steps": 5_000, "eval_returns": [90.0, 480.0]},
                  "1": {"solved": False, "solved_at_steps": None, "eval_returns": [300.0, 200.0]},
                  "2": {"solved": True, "solved_at_steps": 10_000, "eval_returns": [499.0]}},
            "b": {"0": {"solved": False, "solved_at_steps": None, "eval_returns": [10.0]}}}
    summary = summarize(runs)
    assert summary == {"a": {"solved": 2, "seeds": 3, "median_steps_to_solve": 7_500.0,
                             "median_best_eval": 480.0},
                       "b": {"solved": 0, "seeds": 1, "median_steps_to_solve": None,
                             "median_best_eval": 10.0}}
    lines = readme_lines({"budget": 12_500, "target": 475.0, "seeds": [0, 1, 2],
                          "summary": summary})
    assert "at most 12,500 env steps" in lines[0] and "seeds 0, 1, 2" in lines[0]
    assert lines[4:6] == ["| a | 2/3 | 7,500 | 480 |", "| b | 0/1 | - | 10 |"]


def test_ppo_ablation_names_each_runs_outcome_and_counts_them_per_arm():
    """benchmarks/ppo_ablation.py: held = every evaluation from the first at 475 stayed there;
    reached = got there and fell back; never. Hand-made evaluation lists."""
    from benchmarks.ppo_ablation import outcome, readme_lines, summarize

    assert outcome([100.0, 475.0, 500.0]) == "held"
    assert outcome([480.0, 300.0, 500.0]) == "reached"  # a later dip counts, even if it recovers
    assert outcome([100.0, 474.9]) == "never" and outcome([]) == "never"
    runs = {"a": {"0": {"outcome": "held"}, "1": {"outcome": "never"}},
            "b": {"0": {"outcome": "reached"}, "1": {"outcome": "reached"}}}
    assert summarize(runs) == {"a": {"held": 1, "reached": 0, "never": 1},
                               "b": {"held": 0, "reached": 2, "never": 0}}
    lines = readme_lines({"budget": 40_000, "target": 475.0, "seeds": [0, 1],
                          "summary": summarize(runs)})
    assert "40,000 env steps" in lines[0] and "seeds 0-1" in lines[0]
    assert lines[4:6] == ["| a | 1/2 | 0/2 | 1/2 |", "| b | 0/2 | 2/2 | 0/2 |"]
    assert "seeds 3, 7;" in readme_lines({"budget": 1, "target": 1.0, "seeds": [3, 7],
                                          "summary": {}})[0]


def test_impala_stability_counts_solves_and_the_late_evaluations_at_the_target():
    """benchmarks/impala_stability.py: seeds parsed from ranges; the median and largest env
    steps over the solved runs only; the late fraction counts evaluations after half the
    budget. Hand-made runs."""
    from benchmarks.common import seed_list
    from benchmarks.impala_stability import second_half_at_target, summarize_solves

    assert seed_list("0-3,7") == [0, 1, 2, 3, 7] and seed_list("5") == [5] and seed_list("") == []
    runs = {"0": {"solved": True, "env_steps": 300}, "1": {"solved": False, "env_steps": 1000},
            "2": {"solved": True, "env_steps": 100}, "3": {"solved": True, "env_steps": 200}}
    assert summarize_solves(runs) == {"seeds": 4, "solved": 3, "median_steps": 200,
                                      "max_steps": 300}
    assert summarize_solves({"0": {"solved": False, "env_steps": 9}})["median_steps"] is None
    # budget 100: the evaluations at 60 and 80 count (2 of them, one at 475), not those at <= 50
    assert second_half_at_target([20, 50, 60, 80], [500.0, 500.0, 475.0, 300.0], 100) == 0.5
    assert second_half_at_target([20], [500.0], 100) is None


def test_ppo_benchmark_summarizes_solved_seeds_and_renders_them(monkeypatch):
    """benchmarks/ppo.py: medians and ranges over the solved seeds only; a variant that solved
    none renders as "-"; Stable-Baselines3's run is skipped, not faked, where it is missing."""
    from benchmarks.ppo import readme_lines, run_sb3, summarize

    monkeypatch.setitem(sys.modules, "stable_baselines3", None)  # as if not installed
    assert run_sb3(0, 5_000, 20, 475.0) is None

    runs = {"0": {"solved": True, "steps_to_solve": 10_000, "seconds_to_solve": 2.0},
            "1": {"solved": True, "steps_to_solve": 20_000, "seconds_to_solve": 5.0},
            "2": {"solved": False, "steps_to_solve": None, "seconds_to_solve": None}}
    s = summarize(runs)
    assert s["solved"] == 2 and s["seeds"] == 3
    assert s["median_steps_to_solve"] == 15_000 and s["range_seconds_to_solve"] == [2.0, 5.0]
    none = summarize({"0": runs["2"]})
    assert none["solved"] == 0 and none["median_seconds_to_solve"] is None
    lines = readme_lines({"summary": {"ppo_1_process": s, "appo_ray": none}})
    assert lines[4] == "| rlkit PPO, one process | 2/3 | 15,000 (10,000-20,000) | 3.5 (2.0-5.0) |"
    assert lines[5] == "| rlkit APPO on Ray (asynchronous, V-trace) | 0/1 | - | - |"


def test_pixels_benchmark_reports_the_first_evaluation_at_each_score():
    """benchmarks/pixels.py: the frames and minutes of the first evaluation whose mean reaches
    5, 10, 15 (hand-made history), the medians over the seeds that reached each, "-" for a
    score not reached; its settings build Breakout-MinAtar's frames."""
    from benchmarks.pixels import first_reaching, readme_lines, summarize
    from rlkit.algos.dqn import BREAKOUT_MINATAR

    steps, seconds, means = [10_000, 20_000, 30_000], [60.0, 120.0, 240.0], [3.0, 10.5, 9.0]
    assert first_reaching(steps, seconds, means, 5) == (20_000, 2.0)
    assert first_reaching(steps, seconds, means, 10) == (20_000, 2.0)
    assert first_reaching(steps, seconds, means, 15) == (None, None)
    run = {"reach": {str(t): dict(zip(("frames", "minutes"),
                                      first_reaching(steps, seconds, means, t)))
                     for t in (5, 10, 15)},
           "eval_returns": means, "updates_per_second": 90.0, "frames_per_second": 220.0,
           "env_steps": 30_000}
    slow = {**run, "reach": {**run["reach"], "5": {"frames": 30_000, "minutes": 4.0}}}
    summary = summarize({"0": run, "1": slow}, 30_000)
    assert summary["5"] == {"reached": 2, "median_frames": 25_000, "median_minutes": 3.0}
    assert summary["15"] == {"reached": 0, "median_frames": None, "median_minutes": None}
    memory = {"1M": {"estimate_bytes": 816 * 2**20, "resident_bytes": 817 * 2**20,
                     "resident_over_estimate": 817 / 816}}
    stopped = {**run, "stopped_at_minutes": 3.5}  # a seed stopped before its budget says so
    rows = readme_lines({"summary": summary, "runs": {"0": run, "1": stopped},
                         "replay_memory": memory,
                         "machine": {"cpu": "x", "logical_cores": 2, "gpu": None}})
    assert "| 0 | 30,000 | 20,000 | 20,000 | - | 2.0 | 2.0 | - | 10.5 | 90 | 220 |" in rows
    assert ("| 1 | 30,000 (stopped) | 20,000 | 20,000 | - | 2.0 | 2.0 | - | 10.5 | 90 | 220 |"
            in rows)
    assert rows[-3:] == ["", "Replay of 1M: 816 MiB estimated by the memory check before "
                         "allocating, 817 MiB resident once filled (1.001x).", ""]
    assert BREAKOUT_MINATAR.env_id == "rlkit/BreakoutMinAtar-v0"


def test_dashboard_benchmark_counts_only_what_ray_default_adds():
    """The install cost is the packages ``ray[default]`` needs that nothing else in
    requirements.txt needs: the dashboard's web server is among them, numpy and plain ray's own
    dependencies are not."""
    from benchmarks.dashboard import install_cost

    cost = install_cost()
    assert {"aiohttp", "opencensus", "py-spy"} <= set(cost["packages"])
    assert not {"numpy", "ray", "protobuf", "msgpack", "torch"} & set(cost["packages"])
    assert cost["count"] == len(cost["packages"]) and cost["megabytes"] > 1


def test_pong_benchmark_reports_the_first_evaluation_at_18_in_frames(tmp_path):
    """benchmarks/pong.py on hand-made results: agent steps become frames (x4), the first
    evaluation at 18 is the one reported, a seed that never reached it is left out of the
    medians."""
    from types import SimpleNamespace

    from benchmarks.pong import run_record, summarize
    from rlkit.core.metrics import History

    def result(returns):
        h = History()
        for k, r in enumerate(returns):
            h.log_eval(200_000 * (k + 1), 600.0 * (k + 1), r, 0.0)
        return SimpleNamespace(history=h, env_steps=200_000 * len(returns), updates=100,
                               wall_seconds=600.0 * len(returns), learner_busy_seconds=50.0,
                               device="cpu", policy_lags=[0, 1, 2],
                               diagnostics={"entropy": [float(k) for k in range(20)]})

    reached = run_record(result([-20.0, 18.5, 17.0, 20.0]))
    assert reached["training_means"] == []  # (no training episodes in this history)
    assert reached["steps_to_target"] == 400_000 and reached["minutes_to_target"] == 20.0
    assert reached["frames_per_second"] == 4 * 200_000 / 600.0 and reached["best_eval"] == 20.0
    # each learner metric in tenths of the run (fewer values than ten: one slice each)
    assert reached["learner_tenths"] == {"entropy": [0.5 + 2 * k for k in range(10)],
                                         "policy_lag": [0.0, 1.0, 2.0]}
    never = run_record(result([-21.0, -5.0]))
    assert never["steps_to_target"] is None
    summary = summarize({"0": reached, "1": never}, workers=15, cpus=16.0, total_steps=10**7)
    assert summary["reached"] == 1 and summary["median_frames_to_target"] == 1_600_000
    assert summary["median_minutes_to_target"] == 20.0
    # training episodes: the mean return of those that ended in each window of 100k steps
    from benchmarks.pong import training_means

    h = History()
    for step, ret in ((50_000, -21.0), (100_000, -19.0), (100_001, -10.0), (350_000, 4.0)):
        h.log_episode(step, 1.0, ret)
    assert training_means(h) == [(100_000, -20.0), (200_000, -10.0), (400_000, 4.0)]
    # a seed stopped by --minutes before its first checkpoint reports that, and no rate
    from benchmarks.pong import stopped_record
    from rlkit.algos.ppo import PONG_APPO

    stopped = stopped_record(str(tmp_path), PONG_APPO, 0.5)
    assert stopped["stopped_at_minutes"] == 0.5 and "no checkpoint file" in stopped["error"]
    summary = summarize({"0": reached, "1": stopped}, workers=15, cpus=16.0, total_steps=10**7)
    assert summary["seeds"] == 2 and summary["median_frames_per_second"] == 4 * 200_000 / 600


@pytest.mark.slow  # (it trains, seconds)
def test_pixels_benchmark_stops_a_seed_on_time_and_resumes_it_from_its_checkpoint(tmp_path):
    """``--minutes`` and ``--checkpoint-dir`` of ``benchmarks.pixels`` on a budget of seconds:
    a seed stopped by its timer reports what its checkpoint holds, and the next call resumes it
    from there to the budget, its clock and curve continued."""
    import dataclasses

    from benchmarks.pixels import train_seed
    from rlkit.algos.dqn import BREAKOUT_MINATAR

    config = dataclasses.replace(BREAKOUT_MINATAR, total_steps=10**6, learning_starts=200,
                                 eval_every=1_000, eval_episodes=1, buffer_size=5_000)
    folder = tmp_path / "seed0"
    stopped = train_seed(config, folder, minutes=0.05)  # 3 s: a Ctrl-C, then its checkpoint
    assert stopped["stopped_at_minutes"] >= 0.05 and 0 < stopped["env_steps"] < 10**6
    assert stopped["eval_steps"] == list(range(1_000, stopped["env_steps"] + 1, 1_000))
    budget = stopped["env_steps"] + 1_000
    done = train_seed(dataclasses.replace(config, total_steps=budget), folder, minutes=None)
    assert "stopped_at_minutes" not in done and done["env_steps"] == budget
    assert done["eval_steps"][:len(stopped["eval_steps"])] == stopped["eval_steps"]
    assert done["eval_returns"][:len(stopped["eval_returns"])] == stopped["eval_returns"]
    assert done["wall_seconds"] > stopped["wall_seconds"]


def test_a_markdown_table_has_its_header_rule_and_one_line_per_row():
    from benchmarks.common import table

    assert table(("seed", "solved"), [(0, True), ("1", "-")]) == [
        "| seed | solved |", "| --- | --- |", "| 0 | True |", "| 1 | - |"]
    assert table(("a",), []) == ["| a |", "| --- |"]


def test_the_minutes_timer_interrupts_a_process_that_ignores_ctrl_c():
    """``interrupt_after`` in a process started with ``SIGINT`` ignored (a shell's background
    job): the timer's Ctrl-C still arrives as a ``KeyboardInterrupt``, not dropped."""
    import signal
    import time

    from benchmarks.common import interrupt_after

    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt):
            interrupt_after(0.05 / 60)  # 50 ms
            time.sleep(30)  # (a few ms on any machine; 30 s only if the Ctrl-C were dropped)
    finally:
        interrupt_after(0)
        signal.signal(signal.SIGINT, before)


def _presets():
    """(result, key in it, the code's preset it was measured with): each committed benchmark
    result that a notebook or the README quotes, against the settings the code holds now."""
    from benchmarks import apex_ablation, ppo_ablation
    from rlkit.algos.a2c import A2CConfig
    from rlkit.algos.dqn import BREAKOUT_MINATAR
    from rlkit.algos.impala import IMPALAConfig
    from rlkit.algos.ppo import PENDULUM, PPOConfig
    from rlkit.algos.sac import LUNAR_LANDER

    recorded_budget = json.loads((ROOT / "benchmarks/results/apex_ablation.json").read_text())
    return {"apex_ablation": ("config", apex_ablation.ablation_config(recorded_budget["budget"])),
            "ppo_ablation": ("config", PPOConfig()), "ppo": ("config", PPOConfig()),
            "ppo pendulum": ("pendulum_config", PENDULUM), "a3c": ("config", A2CConfig()),
            "impala": ("config", IMPALAConfig()), "impala_stability": ("config", IMPALAConfig()),
            "lunar": ("config", LUNAR_LANDER), "pixels": ("config", BREAKOUT_MINATAR),
            "pixels_1m": ("config", BREAKOUT_MINATAR)}


@pytest.mark.parametrize("name", ["apex_ablation", "ppo_ablation", "ppo", "ppo pendulum", "a3c",
                                  "impala", "impala_stability", "lunar", "pixels", "pixels_1m"])
def test_a_committed_benchmark_result_was_measured_with_the_settings_in_the_code(name):
    """A notebook or the README that quotes a committed result quotes it for the code's
    settings: change a preset (or an arm) without rerunning its benchmark and this fails, naming
    the fields. A field a config gained after the run counts at its default, as the run did."""
    from rlkit.core.common import config_dict, with_added_fields

    key, preset = _presets()[name]
    data = json.loads((ROOT / "benchmarks/results" / f"{name.split()[0]}.json").read_text())
    recorded, now = with_added_fields(data[key], preset), config_dict(preset)
    differ = {k: (recorded.get(k), now.get(k)) for k in recorded.keys() | now.keys()
              if recorded.get(k) != now.get(k)}
    assert not differ, (f"benchmarks/results/{name.split()[0]}.json was measured with other "
                        f"settings (recorded, code): {differ}; rerun its benchmark")
    if name == "apex_ablation":
        from benchmarks.apex_ablation import ARMS
        from rlkit.algos.apex import ApexConfig

        assert data["arms"] == ARMS and data["apex_config"] == config_dict(ApexConfig())
    if name == "ppo_ablation":
        from benchmarks.ppo_ablation import ARMS

        assert data["arms"] == ARMS
