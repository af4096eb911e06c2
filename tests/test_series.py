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
        for key in (pattern.env_steps, pattern.seconds):
            assert f'"{key.split("/")[0]}"' in code, (pattern.name, key)
