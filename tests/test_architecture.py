"""The package's layering, read from the code: imports flow one way, fixtures stay out of
production, modules and driver functions stay short (see docs/architecture.md)."""

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "rlkit"
#: Lower number = lower layer; a module may import only from its own layer or below.
LAYERS = {"core": 0, "testing": 1, "envs": 1, "replay": 1, "notebook": 1, "algos": 2, "train": 3,
          "distributed": 4}
#: Inside distributed/: the runtime every pattern runs on, below the patterns.
PATTERNS = ("off_policy", "apex", "a3c", "impala")


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
    return LAYERS[parts[1]] if len(parts) > 1 else 0


def test_the_top_level_holds_packages_whose_names_say_what_they_hold():
    top = sorted(p.name for p in ROOT.iterdir() if p.name != "__pycache__")
    assert top == sorted(["__init__.py", *LAYERS]), top


def test_the_patterns_build_on_the_runtime_not_on_each_other():
    for module, deps in GRAPH.items():
        parts = module.split(".")
        if len(parts) > 3 and parts[1] == "distributed":
            other = {d.split(".")[2] for d in deps if d.startswith("rlkit.distributed.")
                     and len(d.split(".")) > 3} - {parts[2], "runtime"}
            assert not other, f"{module} imports another pattern: {other}"
        if module.startswith("rlkit.distributed.runtime"):
            up = [d for d in deps if d.split(".")[2:3] and d.split(".")[2] in PATTERNS]
            assert not up, f"{module} imports a pattern: {up}"


def _imported_names(path: Path) -> list[tuple[str, str]]:
    """``(rlkit module, name)`` for every ``from rlkit... import name`` in the file."""
    return [(node.module, alias.name) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module in MODULES
            for alias in node.names]


@pytest.mark.parametrize("root", ["rlkit", "benchmarks", "tests", "notebooks/solutions"])
def test_every_name_imported_from_rlkit_exists(root):
    """A name moved to another module leaves no import behind (in the package, benchmarks,
    tests and solutions; the notebooks' imports are checked by running them)."""
    import importlib

    missing = [f"{path.name}: from {module} import {name}"
               for path in (ROOT.parent / root).rglob("*.py")
               for module, name in _imported_names(path)
               if not hasattr(importlib.import_module(module), name)
               and not (MODULES[module].name == "__init__.py"
                        and f"{module}.{name}" in MODULES)]
    assert missing == []


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


def code_lines(text: str) -> int:
    """Lines that hold code: not blank, not a comment, not part of a docstring (documentation
    is never a reason to split a module)."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                docs.update(range(first.lineno, first.end_lineno + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docs)
    return len(lines)


def test_code_lines_count_code_only():
    text = ('"""Module doc,\ntwo lines."""\n\n# a comment\ndef f(x):\n    """Doc."""\n'
            '    return (x +\n            1)\n')
    assert code_lines(text) == 3  # def, and the two lines of the return


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    """At most 220 lines of code a module (docstrings and comments do not count: a 300-line
    cap on the whole file split classes whose documentation grew; issue 39)."""
    lines = code_lines(MODULES[module].read_text())
    assert lines <= 220, f"{module} has {lines} lines of code; split it by responsibility"


#: The distributed drivers: each is a :class:`rlkit.distributed.runtime.driver.DriverRun`
#: filled in.
DRIVERS = {"rlkit.distributed.off_policy.driver": ["OffPolicyRun"],
           "rlkit.distributed.apex.driver": ["ApexRun"],
           "rlkit.distributed.impala.driver": ["IMPALARun"],
           "rlkit.distributed.a3c.driver": ["A3CRun", "A2CRun"]}


def _function_lengths(module: str) -> dict[str, int]:
    out = {}
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.FunctionDef):
            has_doc = isinstance(node.body[0], ast.Expr) and len(node.body) > 1
            body = node.body[1:] if has_doc else node.body
            out[node.name] = node.end_lineno - body[0].lineno + 1
    return out


@pytest.mark.parametrize("module", [*DRIVERS, "rlkit.distributed.runtime.driver"])
def test_driver_functions_fit_on_a_screen(module):
    long = {name: n for name, n in _function_lengths(module).items() if n > 60}
    assert not long, f"{module}: functions over 60 lines of code: {long}"


@pytest.mark.parametrize("module", ["rlkit.train.loop", "rlkit.train.impala"])
def test_single_process_loops_fit_on_a_screen(module):
    long = {name: n for name, n in _function_lengths(module).items() if n >= 80}
    assert not long, f"{module}: functions of 80 lines or more: {long}"


@pytest.mark.parametrize("module,classes", sorted(DRIVERS.items()))
def test_every_driver_is_the_one_skeleton(module, classes):
    """Each pattern's run class extends DriverRun, fills in its parts, runs the shared loop,
    and returns a result that extends RunResult."""
    import importlib
    import inspect
    import typing

    from rlkit.core.metrics import RunResult
    from rlkit.distributed.runtime.driver import DriverRun

    mod = importlib.import_module(module)
    for name in classes:
        cls = getattr(mod, name)
        assert issubclass(cls, DriverRun), f"{name} does not extend DriverRun"
        for part in ("role_names", "start_roles", "schedule", "done", "result"):
            assert getattr(cls, part) is not getattr(DriverRun, part), f"{name} lacks {part}"
        result_type = typing.get_type_hints(cls.result)["return"]
        assert issubclass(result_type, RunResult), f"{name}.result gives a {result_type}"
        # a train() of its own may launch the first calls, then it must run the shared loop
        own = cls.__dict__.get("train")
        if own is not None:
            assert "super().train()" in inspect.getsource(own), f"{name} writes its own loop"
    assert "ray.wait(" not in MODULES[module].read_text().replace(
        "ray.wait(list(self.pending)", ""), f"{module} waits outside the shared loop"


def test_every_driver_names_its_roles_with_one_vocabulary():
    """'worker i' in every pattern (never 'rollout worker i' or 'actor i')."""
    for module in DRIVERS:
        text = MODULES[module].read_text()
        assert 'f"rollout worker {' not in text and 'f"actor {' not in text, module


def test_messages_between_processes_are_typed():
    """No role returns a dict[str, Any] report, and no driver indexes a report by key."""
    import re

    for module in [*DRIVERS, "rlkit.distributed.off_policy.roles", "rlkit.distributed.apex.roles",
                   "rlkit.distributed.apex.shards", "rlkit.distributed.impala.roles",
                   "rlkit.distributed.a3c.roles"]:
        text = MODULES[module].read_text()
        untyped = re.findall(r"def (\w+)\([^)]*\)\s*->\s*dict\[str, Any\]", text)
        assert set(untyped) <= {"__getstate__"}, f"{module} returns untyped dicts: {untyped}"
        assert not re.search(r'(report|stats|metrics)\[["\']', text), \
            f"{module} reads a message by key"


@pytest.mark.parametrize("package", ["rlkit.algos", "rlkit.distributed", "rlkit.train"])
def test_package_exports_resolve_and_load_lazily(package):
    """``from rlkit.algos import DQNConfig`` and the like (issue 39: a notebook imports what it
    needs from a handful of places): every export is the object its module defines; and
    importing one algorithm's module (as a Ray worker does) imports no other algorithm."""
    import importlib
    import subprocess
    import sys

    pkg = importlib.import_module(package)
    assert pkg.__all__ == sorted(pkg.EXPORTS)
    for name, module in pkg.EXPORTS.items():
        assert getattr(pkg, name) is getattr(importlib.import_module(f"{package}.{module}"), name)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"):
        getattr(pkg, "NoSuchThing")
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, rlkit.algos.dqn; print(' '.join(sys.modules))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert not {"rlkit.algos.ppo", "rlkit.algos.sac", "rlkit.algos.apex"} & set(loaded)


UPDATES = ("update", "update_prioritized")


def _key_reads_of_updates(tree: ast.AST) -> list[str]:
    """``x["key"]`` where ``x`` came from a learner's ``update``/``update_prioritized`` (also
    ``update(...)["key"]`` and the first of ``report, td = ...update_prioritized(...)``)."""
    def from_update(node: ast.AST) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in UPDATES)

    found = []
    for func in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.Module)]:
        names = set()
        for node in ast.walk(func):
            if isinstance(node, ast.Assign) and from_update(node.value):
                for target in node.targets:
                    first = target.elts[0] if isinstance(target, ast.Tuple) else target
                    if isinstance(first, ast.Name):
                        names.add(first.id)
        def is_report(node: ast.AST) -> bool:
            return from_update(node) or (isinstance(node, ast.Name) and node.id in names)

        for node in ast.walk(func):
            keyed = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                     and isinstance(node.slice.value, str) and is_report(node.value))
            fetched = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                       and node.func.attr in ("pop", "get") and is_report(node.func.value))
            if keyed or fetched:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_learner_reports_are_typed_and_read_by_name():
    """Every learner's ``update`` returns a typed report (a NamedTuple of its own), and nothing
    in the package reads one by key (issue 39): a misspelt metric is an AttributeError where it
    is read, not a KeyError at the end of a long run, and the fields are documented once."""
    assert _key_reads_of_updates(ast.parse('m = learner.update(b)\nloss = m["loss"]\n'))
    assert _key_reads_of_updates(ast.parse('x = l.update_prioritized(b, w)[0]["loss"]\n')) == []
    assert _key_reads_of_updates(ast.parse('r, td = l.update_prioritized(b, w)\nr["loss"]\n'))
    assert _key_reads_of_updates(ast.parse('m = learner.update(b)\nloss = m.pop("loss")\n'))
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        assert _key_reads_of_updates(tree) == [], module
        for node in ast.walk(tree):
            if (isinstance(node, ast.FunctionDef) and node.name in UPDATES
                    and module.startswith("rlkit.algos") and node.returns is not None):
                returns = ast.unparse(node.returns)
                assert "dict" not in returns, f"{module}.{node.name} returns {returns}"
