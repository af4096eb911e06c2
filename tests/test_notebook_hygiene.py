"""Notebooks are stored clean and follow the series' shape."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_without_outputs(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name} cell {i} has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_cell_has_a_unique_id(path):
    # nbformat 4.5 requires cell ids (nbformat warns today and will refuse later)
    nb = json.loads(path.read_text())
    ids = [cell.get("id") for cell in nb["cells"]]
    assert all(ids), f"{path.name}: cells {[i for i, x in enumerate(ids) if not x]} have no id"
    assert len(set(ids)) == len(ids), f"{path.name}: cell ids repeat"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_shape_objectives_checks_summary_exercises(path):
    nb = json.loads(path.read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    for heading in ("Objectives", "Summary", "Exercises"):
        assert heading in text, f"{path.name} has no '{heading}' section"
    assert sum("assert " in c for c in code) >= 3, f"{path.name} has too few assert checks"
    if any("import ray" in c for c in code):
        assert "ray.shutdown()" in code[-1], f"{path.name} must end with ray.shutdown()"
