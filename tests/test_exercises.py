"""Every coding exercise in the notebooks works: its check cell reports an unfilled stub as
"not attempted" without breaking the notebook, and passes once the stub is replaced by the
solution in ``notebooks/solutions/`` (with ``rlkit.notebook.exercises.STRICT`` on, so a failing
check raises). Each exercise runs in a namespace holding its notebook's imports."""

import ast
import json
import re
from pathlib import Path

import pytest

import rlkit.notebook.exercises

ray = pytest.importorskip("ray")

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
MARK = re.compile(r"^# (Exercise|Check): (\w+)", re.M)


def _import_statements(cell: str) -> str:
    """The import statements of a code cell (IPython magics such as ``%matplotlib`` dropped)."""
    source = "\n".join(line for line in cell.splitlines() if not line.startswith("%"))
    return "\n".join(ast.get_source_segment(source, node) for node in ast.parse(source).body
                     if isinstance(node, ast.Import | ast.ImportFrom))


def _exercises():
    """(notebook, function name, stub source, check source, imports source) per exercise."""
    found = []
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        code = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                if c["cell_type"] == "code"]
        imports = "\n".join(_import_statements(cell) for cell in code)
        stubs = {m.group(2): c for c in code if (m := MARK.match(c)) and m.group(1) == "Exercise"}
        checks = {m.group(2): c for c in code if (m := MARK.match(c)) and m.group(1) == "Check"}
        assert stubs.keys() == checks.keys(), f"{path.name}: every stub needs its check cell"
        found += [(path.stem, name, stubs[name], checks[name], imports) for name in stubs]
    return found


EXERCISES = _exercises()


def _solution(notebook: str, name: str) -> str:
    source = (NOTEBOOKS / "solutions" / f"{notebook}.py").read_text()
    tree = ast.parse(source)
    header = "\n".join(ast.get_source_segment(source, n) for n in tree.body
                       if isinstance(n, ast.Import | ast.ImportFrom))
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert name in funcs, f"notebooks/solutions/{notebook}.py has no {name}"
    return header + "\n" + "\n\n".join(ast.get_source_segment(source, f)
                                       for f in funcs.values())


def _arguments(source: str, name: str) -> list[str]:
    func = next(n for n in ast.parse(source).body
                if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in func.args.args]


def test_every_notebook_has_at_least_two_coding_exercises():
    counts = {p.stem: 0 for p in NOTEBOOKS.glob("*.ipynb")}
    for notebook, *_ in EXERCISES:
        counts[notebook] += 1
    too_few = {name: n for name, n in counts.items() if n < 2}
    assert not too_few, f"notebooks with fewer than two coding exercises: {too_few}"


@pytest.mark.ray
@pytest.mark.parametrize("notebook, name, stub, check, imports", EXERCISES,
                         ids=[f"{e[0][:2]}-{e[1]}" for e in EXERCISES])
def test_exercise_stub_reports_and_solution_passes(ray_cluster, monkeypatch, notebook, name, stub,
                                                   check, imports):
    solution = _solution(notebook, name)
    assert _arguments(solution, name) == _arguments(stub, name), "signatures differ"
    namespace: dict = {}
    exec(imports, namespace)  # the notebook's imports (ray is already initialised)
    exec(stub, namespace)
    # the stub as the notebook stores it: the check must reach the learner's function (which
    # raises NotImplementedError), not pass by testing rlkit against itself
    monkeypatch.setattr(rlkit.notebook.exercises, "STRICT", True)
    with pytest.raises(NotImplementedError):
        exec(check, namespace)
    exec(solution, namespace)  # the stub replaced by the solution
    exec(check, namespace)  # raises if the solution does not pass
