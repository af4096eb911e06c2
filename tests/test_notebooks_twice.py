"""Running a notebook twice in one kernel works: the Ray notebooks shut Ray down at the end and
start it again at the top, no actor or name is left over from the first run, and every check
cell passes both times. (nbval runs every notebook once; this runs two of the Ray ones twice.)"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.ray
@pytest.mark.slow
# 00 (Ray core) and 03 (the full driver: init, actors, checkpoints, a SIGINT, shutdown) keep
# the lifecycle covered; 02 uses the same driver and passed twice too, but costs ~5 min more,
# and `make test` must stay well under 30 minutes on 2 cores.
@pytest.mark.parametrize("name", ["00_ray_core.ipynb", "03_sac_gpu_ray.ipynb"])
def test_ray_notebook_runs_twice_in_one_kernel(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    cells = [(i, c) for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and "NBVAL_SKIP" not in c.source]
    with client.setup_kernel():
        for run in (1, 2):
            for index, cell in cells:
                client.execute_cell(cell, index)  # raises CellExecutionError on any failure
    assert cells
