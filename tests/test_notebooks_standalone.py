"""Every notebook runs top to bottom on its own, with no other notebook's results on disk.

A notebook that compares itself with earlier ones reads their ``results/<name>.json``. In a
fresh checkout (``results/`` is not committed) or after ``make clean`` those files are absent,
and the notebook must draw what exists and say what is missing, not stop. Running every
notebook again against an empty folder would cost as much as the whole notebook tier, so this
test runs only the cells that read another notebook's results (and a check cell that reads
what they computed), after the notebook's imports, with the notebook's own earlier state and
results stood in for by hand-made ones (``OWN_STATE``, ``OWN_RESULTS``) and its trainers by
stand-ins that return at once (``TRAINERS``), against an otherwise empty ``RLKIT_RESULTS_DIR``.

A cell found here that needs a name the test does not provide fails with ``NameError``: give
it a stand-in in ``OWN_STATE`` (it is the notebook's own state, never another notebook's).
"""

from __future__ import annotations

import ast
import json
import re
import types
from pathlib import Path

import matplotlib
import pytest

from rlkit.algos.dqn import DQNConfig
from rlkit.algos.impala import IMPALAConfig
from rlkit.core.metrics import History

matplotlib.use("Agg")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: A string literal naming a notebook's results, e.g. "05_a3c".
RESULTS_NAME = re.compile(r"""["'](\d\d)_[a-z0-9_]+["']""")


def history(steps=(1_000, 2_000), returns=(100.0, 480.0), seconds=(1.0, 2.0)) -> History:
    h = History()
    for step, ret, sec in zip(steps, returns, seconds):
        h.log_episode(step, sec, ret)
        h.log_eval(step, sec, ret, 0.0)
    return h


def run(**fields) -> types.SimpleNamespace:
    """A stand-in for a training result: a history and whatever fields a cell reads."""
    h = fields.pop("history", history())
    return types.SimpleNamespace(history=h, **fields)


#: The notebook's own state the results-reading cells use (what its earlier cells computed;
#: notebook 02's fallback trains notebook 01's reference: a stand-in that returns at once).
OWN_STATE = {
    "02": lambda: {"SEED": 0, "NUM_WORKERS": 2, "KILL_AT": 1_000, "result": run(),
                   "config": DQNConfig(),
                   "train_dqn": lambda config: run(env_steps=2_000, wall_seconds=2.0,
                                                   eval_return=480.0)},
    "04": lambda: {"SEED": 0, "result": run(solved_at_steps=2_000, solved_at_seconds=2.0),
                   "ddpg": run(env_steps=2_000, solved_at_steps=2_000, solved_at_seconds=2.0,
                               history=history(returns=(-900.0, -180.0)))},
    "06": lambda: {"SEED": 0, "ceiling": 40_000.0, "config": IMPALAConfig()},
    "08": lambda: {"SEED": 0, "one_process": {0: run(env_steps=2_000)},
                   "ppo_ray": run(env_steps=2_000), "appo": run(env_steps=3_000),
                   "pendulum": run(env_steps=80_000)},
    "09": lambda: {"SEED": 0, "dqn_run": run(env_steps=20_000), "ppo_run": run(env_steps=60_000),
                   "appo_run": run(env_steps=100_000),
                   "impala_runs": {1: run(env_steps=250_000), 2: run(env_steps=120_000)},
                   "apex_two": {"frames": 20_002, "minutes": 1.28},
                   "on_ray": {"APPO, 2 workers": types.SimpleNamespace(num_workers=2),
                              "IMPALA, 1 worker": types.SimpleNamespace(num_workers=1)},
                   "rows": {"APPO, 2 workers": run(pace=lambda n: types.SimpleNamespace(
                                limit="learner")),
                            "IMPALA, 1 worker": run(pace=lambda n: types.SimpleNamespace(
                                limit="actors"))}},
}
#: Trainers a results-reading cell calls (it may import them itself), replaced by stand-ins
#: that return at once: the fallbacks that train what another notebook would have saved, and
#: notebook 06's section 10, which measures two short runs.
TRAINERS = {
    "06": {"rlkit.distributed.off_policy.driver.train_dqn_ray": lambda config: run(
               env_steps=config.total_steps, wall_seconds=30.0),
           "rlkit.distributed.impala.driver.train_impala_ray": lambda config: run(
               env_steps=12_000, wall_seconds=20.0, consumption_steps_per_second=800.0)},
}
#: What a notebook saved itself before these cells run (its own results file).
OWN_RESULTS = {
    "06": {"06_impala": {"env_steps": 100_000, "wall_seconds": 4.0, "seed": 0}},
    "08": {"08_ppo": {"env_steps": 2_000, "wall_seconds": 2.0, "appo_env_steps": 3_000,
                      "appo_wall_seconds": 3.0, "pendulum_env_steps": 80_000,
                      "pendulum_wall_seconds": 50.0, "seed": 0}},
    "09": {"09_pixels": {"dqn_env_steps": 20_000, "dqn_wall_seconds": 90.0,
                         "ppo_env_steps": 60_000, "ppo_wall_seconds": 30.0,
                         "appo_env_steps": 100_000, "appo_wall_seconds": 60.0,
                         "impala_env_steps": 250_000, "impala_wall_seconds": 40.0,
                         "apex_env_steps": 20_002, "apex_wall_seconds": 76.8,
                         "on_ray": {"APPO, 2 workers": {"pace": "learner"},
                                    "IMPALA, 1 worker": {"pace": "actors"}}, "seed": 0}},
}


def _code(cell: dict) -> str:
    return "".join(line for line in "".join(cell["source"]).splitlines(keepends=True)
                   if not line.lstrip().startswith("%"))


def _imports(cells: list[dict]) -> str:
    """Every top-level import statement of the notebook, in order."""
    lines = []
    for cell in (cell for cell in cells if cell["cell_type"] == "code"):
        for node in ast.parse(_code(cell)).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                lines.append(ast.unparse(node))
    return "\n".join(lines)


def _assigned(source: str) -> set[str]:
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree)
             if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return names | {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _read(source: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def results_reading_cells(path: Path) -> list[tuple[int, str]]:
    """(index, source) of the cells that read another notebook's results, each followed by the
    check cell after it when that check reads what the cell computed."""
    own = path.name[:2]
    cells = json.loads(path.read_text())["cells"]
    picked = []
    for i, cell in enumerate(cells):
        source = _code(cell)
        if cell["cell_type"] != "code" or "_results(" not in source:
            continue
        if "saved_results(" not in source and not any(
                number != own for number in RESULTS_NAME.findall(source)):
            continue  # (saved_results reads other notebooks' results, named or not)
        picked.append((i, source))
        after = next((j for j in range(i + 1, len(cells)) if cells[j]["cell_type"] == "code"), None)
        if after is not None and "### Check" in "".join(cells[after - 1]["source"]):
            check = _code(cells[after])
            if _assigned(source) & _read(check):
                picked.append((after, check))
    return picked


READERS = {path.name: results_reading_cells(path) for path in NOTEBOOKS}


def test_the_series_has_cells_that_read_other_notebooks_results():
    """The scan finds what it should: notebooks 02, 04, 06, 08 and 09 compare with earlier ones."""
    assert {name[:2] for name, cells in READERS.items() if cells} == {"02", "04", "06", "08", "09"}


@pytest.mark.parametrize("name", [name for name, cells in READERS.items() if cells])
def test_cells_that_read_other_notebooks_results_run_without_them(name, tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setenv("RLKIT_RESULTS_DIR", str(tmp_path))
    number = name[:2]
    for own_name, own in OWN_RESULTS.get(number, {}).items():
        (tmp_path / f"{own_name}.json").write_text(json.dumps(own))
    for target, stand_in in TRAINERS.get(number, {}).items():
        monkeypatch.setattr(target, stand_in)
    cells = json.loads((NOTEBOOKS[0].parent / name).read_text())["cells"]
    namespace: dict = {"__name__": f"notebook_{number}"}
    exec(_imports(cells), namespace)
    namespace.update(OWN_STATE[number]())
    for index, source in READERS[name]:
        try:
            exec(compile(source, f"{name} cell {index}", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"{name} cell {index} fails with no other notebook's results "
                                 f"on disk: {error!r}") from error
    printed = capsys.readouterr().out
    read = {found for _, source in READERS[name] for found in RESULTS_NAME.findall(source)}
    # every other notebook it reads is named as missing, by the notebook's number
    for other in sorted(read - {number}):
        assert f"run notebook {other}" in printed, (other, printed)
    assert list(tmp_path.iterdir()) == [tmp_path / f"{n}.json"
                                        for n in OWN_RESULTS.get(number, {})]
