"""The series' map (rlkit.notebook.series): hand-made results, and every row against the
notebook that writes its numbers."""

import json
import re
from pathlib import Path

from rlkit.notebook.series import PATTERNS, series_rows, series_table

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_a_notebook_not_run_reads_run_nn_and_the_rest_keep_their_numbers():
    saved = {"06_impala": {"env_steps": 144_069, "wall_seconds": 4.06},
             "07_cluster": {"env_steps_to_solve": {"2 learners": 300_000},
                            "seconds_to_solve": {"2 learners": 20.0}}}
    rows = series_rows(saved, up_to="07")
    assert {r["notebook"] for r in rows} == {"01", "02", "03", "04", "05", "06", "07"}
    by_name = {r["name"]: r for r in rows}
    assert by_name["IMPALA"]["env_steps"] == 144_069 and by_name["IMPALA"]["seconds"] == 4.06
    assert by_name["IMPALA, learner group of 2"]["env_steps"] == 300_000  # a nested key
    assert by_name["DQN on Ray"]["env_steps"] is None and by_name["SAC on Ray"]["seconds"] is None
    assert [r["task"] for r in rows] == sorted(r["task"] for r in rows)  # CartPole, then Pendulum
    table = series_table(rows).splitlines()
    assert len(table) == 2 + len(rows)
    assert "| CartPole | 02 DQN on Ray |" in table[3] and table[3].endswith("| run 02 | run 02 |")
    assert any(line.endswith("| 144,069 | 4.1 |") for line in table)
    assert all(r["env_steps"] is None for r in series_rows({}))  # a fresh checkout: all missing
    # the whole series: tasks in the order the notebooks meet them, then the notebooks' order
    rows = series_rows({})
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    assert tasks == ["CartPole", "Pendulum", "Breakout-MinAtar"]
    for task in tasks:
        numbers = [r["notebook"] for r in rows if r["task"] == task]
        assert numbers == sorted(numbers), (task, numbers)


def test_every_row_reads_a_results_file_and_keys_its_notebook_writes():
    """Each pattern's results file is written by its own notebook (``save_results("<name>"``),
    and the keys it reads appear in that notebook's code: a renamed key fails here, not in a
    fresh reader's map."""
    for pattern in PATTERNS:
        (notebook,) = NOTEBOOKS.glob(f"{pattern.notebook}_*.ipynb")
        code = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]
                         if c["cell_type"] == "code")
        assert re.search(rf'save_results\(\s*"{pattern.results}"', code), (pattern.name,
                                                                             notebook.name)
        for key in (pattern.env_steps, pattern.seconds) + ((pattern.pace,) if pattern.pace else ()):
            assert f'"{key.split("/")[0]}"' in code, (pattern.name, key)
        if pattern.pace:
            assert '"pace": ' in code and ".pace(" in code, pattern.name


def test_a_run_that_saved_its_pace_says_which_side_limited_and_a_missing_number_reads_dash():
    """Which side limits is read from the run's own results, never written into the map; a
    notebook that ran but has no number for a row (a benchmark absent) shows "-", not "run 09"."""
    pixels = {"dqn_env_steps": 20_000, "dqn_wall_seconds": 56.0, "ppo_env_steps": 70_692,
              "ppo_wall_seconds": 23.0, "appo_env_steps": 131_232, "appo_wall_seconds": 50.0,
              "impala_env_steps": 121_906, "impala_wall_seconds": 19.0,
              "apex_env_steps": None, "apex_wall_seconds": None,
              "on_ray": {"APPO, 2 workers": {"pace": "learner"},
                         "IMPALA, 1 worker": {"pace": "actors"}}}
    rows = {r["name"]: r for r in series_rows({"09_pixels": pixels}) if r["notebook"] == "09"}
    assert rows["APPO from pixels on Ray"]["limits"].endswith("; this run: the learner")
    assert rows["IMPALA from pixels on Ray, 1 worker"]["limits"].endswith("; this run: the actors")
    assert "this run" not in rows["DQN from pixels, one process"]["limits"]
    table = series_table(list(rows.values()))
    (apex,) = [line for line in table.splitlines() if "Ape-X DQN from pixels" in line]
    assert apex.endswith("| - | - |")
    assert "| 121,906 | 19.0 |" in table and "run 09" not in table
    older = {k: v for k, v in pixels.items() if k not in ("on_ray", "apex_env_steps")}
    rows_older = {r["name"]: r for r in series_rows({"09_pixels": older})}  # an older notebook's
    assert "this run" not in rows_older["APPO from pixels on Ray"]["limits"]
    assert rows_older["Ape-X DQN from pixels on Ray, 2 workers (the benchmark's run)"][
        "env_steps"] is None
    limits = series_table(list(rows.values()), ("pattern", "limits"))
    assert "which side limits" in limits.splitlines()[0] and "this run: the learner" in limits
