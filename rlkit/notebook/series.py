"""The series' map: each pattern the notebooks build, what travels between its processes, what
its run measured (read from the notebooks' ``results/*.json``), when it pays, and what to read
next. Notebook 06 shows the patterns of 01-06, notebook 08 those of the vector tasks, and
notebook 09 ends the series with all of them, its pixel runs included. A later notebook adds its
patterns to :data:`PATTERNS`.

A notebook not run yet has no results file: its rows are kept, with the numbers missing and
the notebook to run named, so the map draws in a fresh checkout too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Pattern:
    """One row of the map.

    Attributes:
        notebook: The notebook that builds it, e.g. ``"02"``.
        name: The pattern, e.g. ``"DQN on Ray"``.
        task: ``"CartPole"`` (solved at 475), ``"Pendulum"`` (-200) or ``"Breakout-MinAtar"``
            (to a greedy mean of 5, ten times random play: notebook 09's target).
        travels: What moves between processes.
        policy: ``"off"`` or ``"on"`` (with how a lag is corrected, where there is one).
        results: The notebook's results file (``results/<results>.json``).
        env_steps: The key of the env steps to solve in that file (``a/b`` for a nested one).
        seconds: The key of the seconds to solve.
        pays_when: When this pattern is the one to use.
        read_next: RLlib's counterpart, a single-file reference, the paper.
        limits: Which side can limit it and how to tell, from what its notebook prints. Which
            side does limit is a fact about one machine at one moment, never a law of the
            pattern: where a run saved its own verdict, ``pace`` names it.
        pace: The key of that run's measured verdict (``"learner"``, ``"actors"`` or
            ``"neither"``, :attr:`rlkit.train.impala.Pace.limit`) in its results, or ``""``.
    """

    notebook: str
    name: str
    task: str
    travels: str
    policy: str
    results: str
    env_steps: str
    seconds: str
    pays_when: str
    read_next: str
    limits: str
    pace: str = ""



PATTERNS: tuple[Pattern, ...] = (
    Pattern("01", "DQN, one process (median of its seeds)", "CartPole", "nothing: one process",
            "off", "01_dqn_single_process", "median_env_steps", "median_wall_seconds",
            "a cheap env and a small network: nothing is worth a second process",
            "CleanRL `dqn.py`; Mnih et al., 2015; van Hasselt et al., 2016 (Double DQN)",
            "no sides: one process acts, then learns, in turn"),
    Pattern("02", "DQN on Ray", "CartPole", "transitions to the learner; weights to the workers",
            "off", "02_dqn_ray_parallel", "solved_at_env_steps", "solved_at_seconds",
            "acting and env steps cost enough to move off the learner's core",
            "RLlib `DQNConfig` with `env_runners(num_env_runners=...)`",
            "the learner's busy share, printed with the result: busy nearly all the run, it sets "
            "the pace and more workers cannot help"),
    Pattern("03", "SAC on Ray", "Pendulum", "transitions to the learner; weights to the workers",
            "off", "03_sac_gpu_ray", "solved_at_env_steps", "solved_at_seconds",
            "continuous actions; a GPU learner fed by CPU workers",
            "RLlib `SACConfig`; CleanRL `sac_continuous_action.py`; Haarnoja et al., 2018",
            "the learner's busy share, printed with the result; a GPU learner moves the limit"),
    Pattern("04", "Ape-X DQN", "CartPole",
            "n-step transitions + priorities to the shards; sampled batches to the learner, new "
            "priorities back; weights to the workers", "off", "04_apex", "dqn_env_steps",
            "dqn_wall_seconds",
            "many actors, a big replay: the shards serve batches faster than one buffer could",
            "Horgan et al., 2018 (Ape-X); Schaul et al., 2016 (prioritized replay)",
            "the timeline's busy fractions and the workers' parked seconds: parked workers wait "
            "for the learner"),
    Pattern("04", "Ape-X DDPG", "Pendulum", "as Ape-X DQN", "off", "04_apex", "ddpg_env_steps",
            "ddpg_wall_seconds", "as Ape-X DQN, for continuous actions",
            "Lillicrap et al., 2016 (DDPG); Horgan et al., 2018",
            "as Ape-X DQN"),
    Pattern("05", "A3C", "CartPole", "gradients to the server; weights back to that worker",
            "on (stale gradients accepted)", "05_a3c", "env_steps", "wall_seconds",
            "workers of uneven speed, small gradients; staleness is tolerable",
            "Mnih et al., 2016 (A3C)",
            "the timeline's busy fractions: the server idles while the workers compute"),
    Pattern("05", "A2C", "CartPole", "gradients to the server, one round at a time; weights to "
            "all", "on", "05_a3c", "a2c_env_steps", "a2c_wall_seconds",
            "the simplest on-policy baseline: no staleness, workers wait for the slowest",
            "Mnih et al., 2016 (A2C is A3C's synchronous variant)",
            "each round waits for its slowest worker: the others' idle time in the timeline"),
    Pattern("06", "IMPALA", "CartPole", "trajectories + behaviour log-probs to the learner; "
            "weights to the actors", "on, V-trace corrected", "06_impala", "env_steps",
            "wall_seconds", "env steps are cheap and plentiful; actors never wait",
            "RLlib `IMPALAConfig`; Espeholt et al., 2018",
            "`result.pace(num_workers)`: the learner's wait for a batch against an actor's "
            "wait for room in the queue; the side that waited less limits"),
    Pattern("07", "IMPALA, learner group of 2", "CartPole",
            "as IMPALA, plus the gradients all-reduced between the ranks (gloo)",
            "on, V-trace corrected", "07_cluster", "env_steps_to_solve/2 learners",
            "seconds_to_solve/2 learners",
            "the update is the bottleneck and each rank has cores or a GPU of its own",
            "RLlib `LearnerGroup`; PyTorch `DistributedDataParallel`",
            "the learner's busy against waiting seconds: more ranks pay only when the update "
            "limits"),
    Pattern("08", "PPO on Ray", "CartPole", "fragments to the learner; weights to the workers, "
            "who wait for them", "on (lag 0)", "08_ppo", "env_steps", "wall_seconds",
            "on-policy with each batch reused for many SGD steps",
            "RLlib `PPOConfig`; CleanRL `ppo.py`; Schulman et al., 2017",
            "synchronous rounds: the workers wait for each update; the learner's busy share"),
    Pattern("08", "APPO", "CartPole", "as IMPALA, with PPO's learner", "on, clipped against the "
            "acting policy, V-trace targets", "08_ppo", "appo_env_steps", "appo_wall_seconds",
            "the rollouts are the slow part: many workers or slow simulators",
            "RLlib `APPOConfig`",
            "`result.pace(num_workers)`, as IMPALA's"),
    Pattern("08", "PPO, Gaussian policy, one process", "Pendulum", "nothing: one process", "on",
            "08_ppo", "pendulum_env_steps", "pendulum_wall_seconds",
            "continuous actions without a replay buffer",
            "CleanRL `ppo_continuous_action.py`",
            "no sides: one process"),
    Pattern("09", "DQN from pixels, one process", "Breakout-MinAtar", "nothing: one process",
            "off", "09_pixels", "dqn_env_steps", "dqn_wall_seconds",
            "frames as uint8 in replay, a conv encoder; the learner's step is the cost",
            "CleanRL `dqn_atari.py`; Young & Tian, 2019 (MinAtar); Mnih et al., 2015",
            "no sides: one process (section 4 prints its updates per second)"),
    Pattern("09", "PPO from pixels, one process", "Breakout-MinAtar", "nothing: one process",
            "on", "09_pixels", "ppo_env_steps", "ppo_wall_seconds",
            "few cores and a cheap env: acting and learning in turn, with nothing to ship",
            "CleanRL `ppo_atari.py`",
            "no sides: one process"),
    Pattern("09", "APPO from pixels on Ray", "Breakout-MinAtar",
            "uint8 fragments to the learner; weights to the workers", "on, clipped against the "
            "acting policy, V-trace targets", "09_pixels", "appo_env_steps", "appo_wall_seconds",
            "a learner with its own fast device (a GPU) and actors with cores of their own",
            "RLlib `APPOConfig` on Atari; Espeholt et al., 2018",
            "`result.pace(num_workers)` (section 5)", "on_ray/APPO, 2 workers/pace"),
    Pattern("09", "IMPALA from pixels on Ray, 1 worker", "Breakout-MinAtar",
            "uint8 fragments to the learner; weights to the actors", "on, V-trace corrected",
            "09_pixels", "impala_env_steps", "impala_wall_seconds",
            "a learner cheap per frame: the actors set the pace, up to the cores they have",
            "RLlib `IMPALAConfig` on Atari; Espeholt et al., 2018",
            "`result.pace(num_workers)` (section 5)", "on_ray/IMPALA, 1 worker/pace"),
    Pattern("09", "Ape-X DQN from pixels on Ray, 2 workers (the benchmark's run)",
            "Breakout-MinAtar", "as Ape-X DQN, frames as uint8", "off", "09_pixels",
            "apex_env_steps", "apex_wall_seconds",
            "cores to spare beside the learner, or a simulator slower than the update",
            "Horgan et al., 2018 (Ape-X); `python -m benchmarks.pixels_apex`",
            "the workers' parked share (section 7): parked workers wait for the learner"),
)


#: How the map words a run's verdict (:attr:`rlkit.train.impala.Pace.limit`).
PACE_WORDS = {"learner": "the learner", "actors": "the actors", "neither": "neither side"}


def _lookup(result: Mapping[str, Any], key: str) -> Any:
    """The value at ``key`` (``a/b`` for a nested one), or ``None`` where a results file
    written by an older version of its notebook lacks it (the map then reads "-")."""
    for part in key.split("/"):
        if not isinstance(result, Mapping) or part not in result:
            return None
        result = result[part]
    return result


def series_rows(saved: Mapping[str, Mapping[str, Any]], up_to: str = "99"
                ) -> list[dict[str, Any]]:
    """One dict per pattern of the notebooks up to ``up_to``: the :class:`Pattern`'s fields,
    plus ``env_steps`` and ``seconds`` to solve from ``saved`` (results by name, e.g. from
    :func:`rlkit.core.metrics.saved_results`), ``None`` where that notebook has not run
    (``ran`` is then False) or its result has no such number, and ``limits`` ending with the
    run's own verdict on which side set the pace, where it saved one.
    Grouped by task in the order the series meets them (CartPole, Pendulum, then
    Breakout-MinAtar), each group in the series' order."""
    rows = []
    for p in PATTERNS:
        if p.notebook > up_to:
            continue
        result = saved.get(p.results)
        row = {**p.__dict__, "ran": result is not None, "env_steps": None, "seconds": None}
        if result is not None:
            row["env_steps"], row["seconds"] = _lookup(result, p.env_steps), _lookup(
                result, p.seconds)
            if p.pace and (verdict := _lookup(result, p.pace)) in PACE_WORDS:
                row["limits"] += f"; this run: {PACE_WORDS[verdict]}"
        rows.append(row)
    first_met = {task: i for i, task in enumerate(dict.fromkeys(p.task for p in PATTERNS))}
    return sorted(rows, key=lambda row: first_met[row["task"]])  # (stable: notebook order kept)


def series_table(rows: list[dict[str, Any]], columns: tuple[str, ...] = (
        "task", "pattern", "travels", "policy", "env_steps", "seconds")) -> str:
    """``rows`` (:func:`series_rows`) as a Markdown table; a number missing because its
    notebook has not run reads "run NN", one its run did not produce "-"."""
    titles = {"task": "task", "pattern": "notebook: pattern", "travels": "what travels between "
              "processes", "policy": "policy", "env_steps": "env steps", "seconds": "seconds",
              "pays_when": "when it pays", "read_next": "read next",
              "limits": "which side limits: how to tell"}
    right = {"env_steps", "seconds"}
    lines = ["| " + " | ".join(titles[c] for c in columns) + " |",
             "| " + " | ".join("---:" if c in right else "---" for c in columns) + " |"]
    for row in rows:
        cells = []
        for c in columns:
            if c == "pattern":
                cells.append(f"{row['notebook']} {row['name']}")
            elif c in right:
                value = row[c]
                missing = "-" if row["ran"] else f"run {row['notebook']}"
                cells.append(missing if value is None else
                             f"{value:,}" if c == "env_steps" else f"{value:.1f}")
            else:
                cells.append(str(row[c]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
