"""Render the README's results block from the JSON files the notebooks and benchmarks write.

    python -m benchmarks.render_readme [--results DIR] [--runtimes FILE]

Replaces the text between ``<!-- results:start -->`` and ``<!-- results:end -->`` in README.md.
``--results`` is the folder holding the notebooks' ``*.json`` (default ``results/``);
``--runtimes`` is the timed ``make test`` run (default
``benchmarks/results/notebook_runtimes.json``); benchmark figures come from
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import table
from benchmarks.lunar import readme_lines as lunar_lines
from benchmarks.learner import readme_lines as learner_lines
from benchmarks.pixels import readme_lines as pixels_lines
from benchmarks.pixels_apex import readme_lines as pixels_apex_lines
from benchmarks.apex_ablation import readme_lines as apex_ablation_lines
from benchmarks.pong import readme_lines as pong_lines
from benchmarks.ppo import readme_lines as ppo_lines
from benchmarks.ppo_ablation import readme_lines as ppo_ablation_lines

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- results:start -->", "<!-- results:end -->"


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _slow_simulator(nb06: dict) -> str:
    """Notebook 06's closing comparison, when its results hold one."""
    slow = nb06.get("slow_simulator")
    if not slow:
        return ""
    seconds = slow["seconds_to_solve"]
    return (f"; at {slow['sleep_seconds'] * 1e3:.0f} ms an env step, projected seconds to solve: "
            + ", ".join(f"{name} {s['slow_projected']:.0f}" for name, s in seconds.items()))


def _pace(run: dict) -> str:
    """The README's words for a notebook 09 run's saved ``pace`` (which side set the pace on
    that machine in that run, as the notebook printed it); empty for a file saved before it."""
    limit = run.get("pace")
    return {"learner": " (the learner set the pace)", "actors": " (the actors set the pace)",
            "neither": " (neither side waited)"}.get(limit, "") if limit else ""


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "not measured"
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def render(results: Path, timing: dict) -> str:
    runtimes = timing.get("notebooks_seconds", {})
    nb01 = _load(results / "01_dqn_single_process.json")
    nb02 = _load(results / "02_dqn_ray_parallel.json")
    nb03 = _load(results / "03_sac_gpu_ray.json")
    bench = ROOT / "benchmarks" / "results"
    tts = _load(bench / "time_to_solve.json")
    rollout = _load(bench / "rollout.json")
    sync = _load(bench / "weight_sync.json")
    beside = ", beside another test file" if timing.get("test_workers", 1) > 1 else ""
    lines = [f"| notebook | what you learn | runtime (2-core CPU{beside}) | headline result |",
             "| --- | --- | --- | --- |"]
    lines.append("| [00 · Ray core, measured](notebooks/00_ray_core.ipynb) | tasks, object refs, "
                 "`ray.put`/`get`/`wait`, actors, resources and the pending-actor trap; the cost "
                 "of a remote call, measured | "
                 f"{_fmt_time(runtimes.get('00_ray_core.ipynb'))} | batching 2,000 transitions "
                 "into one call vs 2,000 calls, measured in the notebook |")
    if nb01:
        seeds = nb01["seeds"]
        lines.append(
            "| [01 · DQN on CartPole, one process](notebooks/01_dqn_single_process.ipynb) | "
            "termination vs truncation, Q-network, replay buffer, TD target, target network, "
            "Double DQN, epsilon schedule, greedy evaluation, 3 seeds | "
            f"{_fmt_time(runtimes.get('01_dqn_single_process.ipynb'))} | greedy eval >= 475 in "
            f"{sum(s['solved'] for s in seeds.values())} of {len(seeds)} seeds; median "
            f"{nb01['median_env_steps']:,.0f} env steps, {nb01['median_wall_seconds']:.0f} s |")
    if nb02:
        lines.append(
            "| [02 · DQN as Ray actors](notebooks/02_dqn_ray_parallel.ipynb) | parameter server, "
            "rollout workers, learner owning the buffer, evaluator; naive vs batched; scaling; "
            "rate limiter; a worker killed and restarted | "
            f"{_fmt_time(runtimes.get('02_dqn_ray_parallel.ipynb'))} | eval "
            f"{nb02['eval_return']:.0f} at {nb02['solved_at_env_steps']:,} env steps, "
            f"{nb02['solved_at_seconds']:.0f} s, {nb02['worker_restarts']} worker restart; batched "
            f"{nb02['batched_steps_per_second'] / nb02['naive_steps_per_second']:.0f}x naive |")
    if nb03:
        lines.append(
            "| [03 · distributed SAC, GPU learner](notebooks/03_sac_gpu_ray.ipynb) | squashed "
            "Gaussian, twin critics, learned temperature; `num_gpus`, `CUDA_VISIBLE_DEVICES`, "
            "GPU memory release; learner speed per device | "
            f"{_fmt_time(runtimes.get('03_sac_gpu_ray.ipynb'))} | Pendulum eval "
            f"{nb03['eval_return']:.0f} (>= -200) at {nb03['solved_at_env_steps']:,} env steps, "
            f"{nb03['solved_at_seconds']:.0f} s, learner on {nb03['device']} |")
    nb04 = _load(results / "04_apex.json")
    if nb04:
        lines.append(
            "| [04 · Ape-X, distributed prioritized replay](notebooks/04_apex_prioritized_replay.ipynb)"
            " | sum tree, importance weights, n-step returns, exploration ladder, actor-side "
            "priorities, sharded replay; DQN and DDPG | "
            f"{_fmt_time(runtimes.get('04_apex_prioritized_replay.ipynb'))} | CartPole eval "
            f"{nb04['dqn_eval_return']:.0f} at {nb04['dqn_env_steps']:,} env steps, "
            f"{nb04['dqn_wall_seconds']:.0f} s; Pendulum eval {nb04['ddpg_eval_return']:.0f} at "
            f"{nb04['ddpg_env_steps']:,} env steps, {nb04['ddpg_wall_seconds']:.0f} s; "
            f"{nb04['num_workers']} workers, {nb04['replay_shards']} shards |")
    nb05 = _load(results / "05_a3c.json")
    if nb05:
        lines.append(
            "| [05 · A3C through a gradient server](notebooks/05_a3c_gradient_server.ipynb) | "
            "policy gradient with a baseline, n-step advantages, A2C vs A3C, gradient staleness, "
            "a slow worker | "
            f"{_fmt_time(runtimes.get('05_a3c_gradient_server.ipynb'))} | A3C greedy eval "
            f"{nb05['eval_return']:.0f} at {nb05['env_steps']:,} env steps, "
            f"{nb05['wall_seconds']:.1f} s; with a slow worker A3C "
            f"{nb05['slow_worker']['speedup']:.1f}x faster than A2C |")
    nb06 = _load(results / "06_impala.json")
    if nb06:
        lines.append(
            "| [06 · IMPALA and V-trace](notebooks/06_impala_vtrace.ipynb) | actors that never "
            "wait, a bounded queue, V-trace, policy lag, throughput vs the rollout ceiling; the "
            "four patterns side by side, and when to use which | "
            f"{_fmt_time(runtimes.get('06_impala_vtrace.ipynb'))} | greedy eval "
            f"{nb06['eval_return']:.0f} at {nb06['env_steps']:,} env steps, "
            f"{nb06['wall_seconds']:.1f} s; learner consumed "
            f"{nb06['efficiency_vs_ceiling']:.2f}x the rollout ceiling{_slow_simulator(nb06)} |")
    nb07 = _load(results / "07_cluster.json")
    if nb07:
        def solved(outcome: dict) -> str:
            return "solved" if outcome["solved"] else "NOT solved"

        lost = nb07["learner_node_loss"]
        lines.append(
            "| [07 · a cluster: nodes, a learner group, a node that dies]"
            "(notebooks/07_cluster.ipynb) | plans per node, a learner group (all-reduced gradients over gloo), a worker's "
            "node and a learner's node lost mid-run, Ray's dashboard, state API and trace | "
            f"{_fmt_time(runtimes.get('07_cluster.ipynb'))} | 4 nodes; 2 learner ranks equal "
            f"one learner to {nb07['equality_max_difference']:.0e}; 2 ranks "
            f"{nb07['group_updates_per_second']['2'] / nb07['group_updates_per_second']['1']:.2f}"
            f"x the updates/s of 1; {solved(nb07['worker_node_loss'])} after losing a worker's "
            f"node, {solved(lost)} after losing a learner's (group restarted in "
            f"{lost['restart_seconds']:.1f} s) |")
    nb08 = _load(results / "08_ppo.json")
    if nb08:
        solved_1p = sum(r["solved"] for r in nb08["one_process"].values())
        lines.append(
            "| [08 · PPO and APPO](notebooks/08_ppo_appo.ipynb) | why policy-gradient steps "
            "stay small, the clipped surrogate, GAE(lambda), epochs over one batch; PPO on Ray "
            "(synchronous) and APPO (asynchronous, V-trace) on notebook 06's roles | "
            f"{_fmt_time(runtimes.get('08_ppo_appo.ipynb'))} | one process: {solved_1p}/"
            f"{len(nb08['one_process'])} seeds solved; PPO on Ray greedy eval "
            f"{nb08['eval_return']:.0f} at {nb08['env_steps']:,} env steps, "
            f"{nb08['wall_seconds']:.1f} s; APPO {nb08['appo_eval_return']:.0f} at "
            f"{nb08['appo_env_steps']:,}, {nb08['appo_wall_seconds']:.1f} s (mean policy lag "
            f"{nb08['appo_policy_lag_mean']:.2f}) |")
    nb09 = _load(results / "09_pixels.json")
    if nb09:
        ray_runs, ceiling = nb09["on_ray"], nb09["ceiling_steps_per_second"]
        appo, one, two = (ray_runs[k] for k in ("APPO, 2 workers", "IMPALA, 1 worker",
                                                 "IMPALA, 2 workers"))
        lines.append(
            "| [09 · Breakout from pixels](notebooks/09_breakout_pixels.ipynb) | frames as uint8 "
            "end to end, bytes per fragment and replay, a conv encoder chosen by the observation; "
            "DQN and PPO in one process, APPO and IMPALA on Ray against the rollout ceiling: "
            "which side limits; Ape-X DQN against one-process DQN, from its benchmark "
            f"| {_fmt_time(runtimes.get('09_breakout_pixels.ipynb'))} | greedy mean >= "
            f"{nb09['target']:.0f} (random {nb09['random_return']:.2f}): DQN at "
            f"{nb09['dqn_env_steps']:,} frames, {nb09['dqn_wall_seconds']:.0f} s; PPO at "
            f"{nb09['ppo_env_steps']:,}, {nb09['ppo_wall_seconds']:.0f} s; on Ray, APPO 2 "
            f"workers at "
            f"{appo['env_steps']:,}, {appo['wall_seconds']:.0f} s, "
            f"{appo['frames_per_second'] / ceiling:.2f}x the rollout ceiling{_pace(appo)}; "
            f"IMPALA 1 worker at {one['env_steps']:,}, {one['wall_seconds']:.0f} s, "
            f"{one['frames_per_second'] / ceiling:.2f}x{_pace(one)} (2 workers, a fixed "
            f"{two['env_steps']:,} frames: {two['frames_per_second'] / ceiling:.2f}x); a fragment "
            f"{nb09['fragment_bytes']:,} bytes ("
            f"{nb09['fragment_bytes_float32'] / nb09['fragment_bytes']:.1f}x as float32) |")
    out = lines + [""]
    if timing:
        check = timing.get("make_check_seconds")
        fast = (f" The fast tier, `make check`, took {check:.0f} s (with `.venv` installed)."
                if check else "")
        workers = timing.get("test_workers", 1)
        streams = (f", {workers} test files at a time: the files' own times add up to "
                   f"{timing['tests_dir_seconds'] / 60:.1f} min for `tests/` and "
                   f"{sum(timing['notebooks_seconds'].values()) / 60:.1f} min for the "
                   f"notebooks, each measured beside another file" if workers > 1 else
                   f" (`tests/` {timing['tests_dir_seconds'] / 60:.1f} min, including the fault "
                   f"tests and Ray code run twice in one kernel; the rest nbval running each "
                   f"notebook once)")
        out += [f"A fresh `make test` took {timing['make_test_total_seconds'] / 60:.1f} min: "
                f"{timing['install_seconds'] / 60:.1f} min to create `.venv` and install, "
                f"{timing['pytest_seconds'] / 60:.1f} min of tests{streams}.{fast} Machine: "
                f"{timing['machine']['cpu']}, {timing['machine']['logical_cores']} cores. "
                f"Source: {timing['source']}.", ""]
    if nb01:
        out += ["**Notebook 01, per seed** (greedy eval over 20 episodes; wall seconds include "
                "the evaluations):", ""]
        out += table(("seed", "solved", "env steps", "wall seconds"),
                     ((s, v["solved"], f"{v['env_steps']:,}", f"{v['wall_seconds']:.1f}")
                      for s, v in nb01["seeds"].items())) + [""]
    if nb02:
        by = nb02["steps_per_second_by_workers"]
        out += ["**Notebook 02, rollout throughput** (env steps per second, learner off, "
                f"{nb02['cpus']} CPUs):", "", "| design | env steps/s | vs naive |",
                "| --- | --- | --- |",
                f"| naive: one remote call per step | {nb02['naive_steps_per_second']:,.0f} | 1x |",
                f"| batched calls, 1 env per worker | "
                f"{nb02['batched_one_env_steps_per_second']:,.0f} | "
                f"{nb02['batched_one_env_steps_per_second'] / nb02['naive_steps_per_second']:.0f}x |",
                f"| same loop (8 envs) in one process, no Ray | "
                f"{nb02['single_process_steps_per_second']:,.0f} | "
                f"{nb02['single_process_steps_per_second'] / nb02['naive_steps_per_second']:.0f}x |"]
        one = by["1"]
        out += [f"| batched calls, 8 envs per worker, {k} worker{'s' if k != '1' else ''} | "
                f"{v:,.0f} | "
                f"{v / nb02['naive_steps_per_second']:.0f}x ({v / one:.2f}x one worker) |"
                for k, v in by.items()]
        if "batched_64_envs_steps_per_second" in nb02:
            wide = nb02["batched_64_envs_steps_per_second"]
            out.append(f"| batched calls, 64 envs per worker (native vector env), 1 worker | "
                       f"{wide:,.0f} | {wide / nb02['naive_steps_per_second']:.0f}x |")
        out += [""]
    if nb03:
        out += ["**Notebook 03, SAC learner alone** (256x256 networks, batch 256, buffer on the "
                "same device):", ""]
        out += table(("device", "updates/s"), ((k, f"{v:.0f}") for k, v in
                                                nb03["learner_updates_per_second"].items()))
        out += [""]
    if tts:
        m = tts["machine"]
        n_seeds = max(s["seeds"] for s in tts["summary"].values())
        out += [f"**Time to solve, {n_seeds} seeds** (`python -m benchmarks.time_to_solve`; "
                f"{m['cpu']}, "
                f"{m['logical_cores']} logical cores, GPU: {m['gpu'] or 'none'}; torch "
                f"{m['torch']}, Ray {m['ray']}):", ""]
        out += table(("run", "solved", "median env steps to solve (range)",
                      "median seconds to solve (range)", "ms per env step"),
                     ((key, f"{s['solved']}/{s['seeds']}",
                       f"{s['median_steps_to_solve']:,.0f} ({s['range_steps_to_solve'][0]:,}-"
                       f"{s['range_steps_to_solve'][1]:,})",
                       f"{s['median_seconds_to_solve']:.1f} ({s['range_seconds_to_solve'][0]:.1f}-"
                       f"{s['range_seconds_to_solve'][1]:.1f})", f"{s['ms_per_env_step']:.2f}")
                      for key, s in tts["summary"].items()))
        out += [""]
    for name, lines in (("apex_ablation", apex_ablation_lines),
                        ("ppo", ppo_lines), ("ppo_ablation", ppo_ablation_lines),
                        ("lunar", lunar_lines), ("pixels", pixels_lines),
                        ("pixels_1m", pixels_lines), ("pixels_apex", pixels_apex_lines),
                        ("pong_h100", pong_lines)):
        data = _load(bench / f"{name}.json")  # each benchmark renders its own block
        if data:
            out += lines(data)
    if rollout:
        out += ["**`make bench` rollout throughput** (learner off; ceiling = the same 8-env loop in "
                "one process):", "", "| run | env steps/s | efficiency vs k x ceiling |",
                "| --- | --- | --- |",
                f"| raw env, random actions, one process | {rollout['raw_env_random_actions']:,.0f} | |",
                f"| env + policy, 8 envs, one process | "
                f"{rollout['single_process_env_plus_policy']:,.0f} | 1.00 |",
                f"| naive, one call per step | {rollout['naive_per_step_calls']:,.0f} | "
                f"{rollout['naive_per_step_calls'] / rollout['single_process_env_plus_policy']:.2f} |"]
        out += [f"| batched, {k} worker(s) | {v:,.0f} | {rollout['efficiency'][k]:.2f} |"
                for k, v in rollout["batched"].items()]
        if "batched_64_envs_1_worker" in rollout:
            out += [f"| env + policy, 64 envs (native vector env), one process | "
                    f"{rollout['single_process_64_envs']:,.0f} | |",
                    f"| batched, 1 worker, 64 envs | {rollout['batched_64_envs_1_worker']:,.0f} | "
                    f"{rollout['efficiency_64_envs']:.2f} (vs the 64-env loop); "
                    f"{rollout['batched_64_envs_vs_naive']:.0f}x naive |"]
        out += [""]
        runs = rollout.get("efficiency_runs")
        if runs:
            large = rollout.get("large_fragment_steps")
            base = rollout.get("fragment_steps", 2000)
            designs = [("plain", "plain processes"), ("actors", "Ray actors, no calls"),
                       ("batched", f"batched, {base}-step fragments")]
            if large and "batched_large_fragments" in runs:
                designs.append(("batched_large_fragments", f"batched, {large}-step fragments"))
            out += [f"Where the efficiency goes (median of {rollout['repeats']} interleaved "
                    "runs [range], each against the one-process loop measured just before it): "
                    "the same loop in k plain processes at once (no Ray), in k Ray actors with "
                    "no call while they step, and the batched design.", ""]
            out += table(("workers", *(label for _, label in designs)), ((k, *(
                f"{runs[d][k]['median']:.2f} [{runs[d][k]['min']:.2f}-{runs[d][k]['max']:.2f}]"
                for d, _ in designs)) for k in runs["batched"]))
            out += [""]
    apex = _load(bench / "apex.json")
    if apex:
        r = apex["summary"]
        out += ["**Ape-X, 3 seeds** (`python -m benchmarks.apex`; seconds after set-up, "
                "evaluations included):", ""]
        rows = []
        for name, label in (("dqn", "Ape-X DQN, CartPole-v1"), ("ddpg", "Ape-X DDPG, Pendulum-v1")):
            s, steps, secs = r[name], r[name]["range_steps_to_solve"], r[name]["range_seconds_to_solve"]
            rows.append((label, f"{s['solved']}/{s['seeds']}",
                         f"{s['median_steps_to_solve']:,.0f} ({steps[0]:,}-{steps[1]:,})",
                         f"{s['median_seconds_to_solve']:.1f} ({secs[0]:.1f}-{secs[1]:.1f})"))
        out += table(("run", "solved", "median env steps (range)", "median seconds (range)"),
                     rows)
        out += ["", f"Sum tree, `sample(256)` + `update(256)` on 131,072 slots: "
                f"{r['sumtree_batches_per_second']:,.0f} batches/s (a binary tree, same code: "
                f"{r['binary_tree_batches_per_second']:,.0f}).", ""]
    a3c, impala = _load(bench / "a3c.json"), _load(bench / "impala.json")
    if a3c or impala:
        out += ["**Time to solve CartPole, policy-gradient methods, 3 seeds** (`python -m "
                "benchmarks.a3c`, `python -m benchmarks.impala`; seconds after actor start-up):",
                ""]
        summaries = list((a3c or {}).get("summary", {}).items())
        summaries += [("impala", impala["summary"])] if impala else []
        rows = []
        for name, r in summaries:
            steps = r.get("range_steps_to_solve")
            steps_text = f" ({steps[0]:,}-{steps[1]:,})" if steps else ""
            secs = r["range_seconds_to_solve"]
            rows.append((name, f"{r['solved']}/{r['seeds']}",
                         f"{r['median_steps_to_solve']:,}{steps_text}",
                         f"{r['median_seconds_to_solve']:.1f} ({secs[0]:.1f}-{secs[1]:.1f})"))
        out += table(("run", "solved", "median env steps (range)", "median seconds (range)"),
                     rows)
        if impala:
            r = impala["summary"]
            out += ["", f"IMPALA's learner consumed {r['learner_steps_per_second']:,.0f} env "
                    f"steps/s against a single-process rollout ceiling of "
                    f"{r['ceiling_steps_per_second']:,.0f} ({r['efficiency_vs_ceiling']:.2f}x), "
                    f"mean policy lag {r['throughput_policy_lag_mean']:.2f} updates."]
        if a3c and "throughput" in a3c:
            t = a3c["throughput"]
            out += ["", f"A3C ({a3c['workers']} workers, no evaluation) consumed "
                    f"{t['a3c_consumption_steps_per_second']:,.0f} env steps/s; one gradient "
                    f"worker's rollout loop alone runs at {t['ceiling_steps_per_second']:,.0f}."]
        out.append("")
    for name in ("learner", "learner_h100"):  # make bench's, and a lent GPU machine's
        data = _load(bench / f"{name}.json")
        if data:
            out += learner_lines(data)
    if sync:
        out += ["**`make bench` weight sync** (median ms). *As training pays it*: publish = the "
                "learner's `get_weights` + sending the server the weights (by value up to 0.9 MiB "
                "in a cluster `init_ray` starts, else `ray.put` + the reference; it does not "
                "wait), fetch = the worker reading the version answer it asked for one fragment "
                "ahead + load. *Blocking*: both sides wait for every reply.", ""]
        out += table(("network", "KiB", "publish", "fetch", "total (target < 2)",
                      "blocking total"),
                     ((name, f"{r['bytes'] / 1024:.0f}", f"{r['publish_ms_median']:.2f}",
                       f"{r['fetch_ms_median']:.2f}", f"{r['total_ms_median']:.2f}",
                       f"{r['blocking_total_ms_median']:.2f}")
                      for name, r in sync["results"].items())) + [""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--runtimes", type=Path,
                        default=ROOT / "benchmarks" / "results" / "notebook_runtimes.json")
    args = parser.parse_args()
    runtimes = json.loads(args.runtimes.read_text()) if args.runtimes.exists() else {}
    readme = ROOT / "README.md"
    text = readme.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}\n{render(args.results, runtimes)}\n{END}{tail}")
    print("README results block rewritten")


if __name__ == "__main__":
    main()
