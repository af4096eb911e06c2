"""The package's layering, read from the code: imports flow one way, fixtures stay out of
production, modules and driver functions stay short (see docs/architecture.md)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rlkit"
#: Lower number = lower layer; a module may import only from its own layer or below.
LAYERS = {"types": 0, "common": 0, "config_checks": 0, "algos": 2, "train": 3,
          "distributed": 4, "testing": 0}  # every other top-level module: layer 1


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """rlkit modules imported anywhere in the file (also inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlkit"):
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("rlkit")}
    return {m for m in out if m in MODULES}


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], 1) if len(parts) > 1 else 0


def test_no_import_cycle():
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in GRAPH[module]:
            assert state.get(dep) != 1, f"import cycle: {' -> '.join(path + [dep])}"
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = 2

    for module in GRAPH:
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_flow_downwards(module):
    upward = [dep for dep in GRAPH[module] if _layer(dep) > _layer(module)]
    assert not upward, f"{module} imports from a higher layer: {upward}"


def test_test_fixtures_are_not_imported_by_the_package():
    users = [m for m, deps in GRAPH.items() if any(d.startswith("rlkit.testing") for d in deps)
             and not m.startswith("rlkit.testing")]
    assert users == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 330, f"{module} has {lines} lines; split it by responsibility"


@pytest.mark.parametrize("module", ["rlkit.distributed.driver", "rlkit.train.loop"])
def test_driver_functions_fit_on_a_screen(module):
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.FunctionDef):
            body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body  # docstring
            lines = node.end_lineno - body[0].lineno + 1
            assert lines < 80, f"{module}.{node.name} has {lines} lines of code"
