"""Running Ray code twice in one notebook kernel works: Ray shuts down at the end and starts
again at the top, no actor is left over from the first run, an interrupted driver (the stop
button) leaves the kernel usable, and every check passes both times.

nbval runs every notebook once, each in a fresh kernel. Here one kernel runs, twice over, the
lifecycle every notebook of the series goes through: ``init_ray``, Ray's core as notebook 00
uses it (a remote function and an actor class defined in the notebook, ``ray.wait``,
``ray.kill``), a distributed run stopped by SIGINT (as JupyterLab's stop button sends) that
saves a checkpoint, a resumed run, and ``ray.shutdown()``. It uses a small DQN instead of a
notebook's whole training (and no notebook of the series, which nbval already runs once): the
driver, supervisor and checkpoint code it exercises are the same for every algorithm.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import RAY_CORE_CELL, wait_until_no_actors

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

LIFECYCLE = [
    """
import os, signal
import ray
from rlkit.algos.dqn import DQNConfig
from rlkit.distributed.runtime.cluster import init_ray
from rlkit.distributed.off_policy.driver import train_dqn_ray
from rlkit.train.checkpoint import load_checkpoint
resources = init_ray()
assert ray.is_initialized() and resources["CPU"] >= 1
""",
    RAY_CORE_CELL,
    """
config = DQNConfig(hidden=(32, 32), batch_size=16, learning_starts=500, total_steps=500_000,
                   eval_every=5_000, eval_episodes=2, target_return=None)
from rlkit.core.metrics import History
original_log_episode, episodes = History.log_episode, [0]

def press_stop_once_training(self, *args):  # a SIGINT, as the stop button sends, once the
    episodes[0] += 1                         # actors are up and episodes are being logged
    if episodes[0] == STOP_AT_EPISODE:
        os.kill(os.getpid(), signal.SIGINT)
    original_log_episode(self, *args)

History.log_episode = press_stop_once_training
try:
    train_dqn_ray(config, checkpoint_dir=CHECKPOINT_DIR)
    raise AssertionError("the run should have been interrupted")
except KeyboardInterrupt:
    pass
finally:
    History.log_episode = original_log_episode
stopped = load_checkpoint(CHECKPOINT_DIR, "DQN", config)
assert 0 < stopped.env_steps < config.total_steps
""",
    """
import dataclasses
resumed = train_dqn_ray(dataclasses.replace(config, total_steps=stopped.env_steps + 1_000,
                                            num_workers=1), resume_from=CHECKPOINT_DIR)
assert resumed.env_steps == stopped.env_steps + 1_000
assert any("resumed from" in e for e in resumed.history.events)
""",
    "ray.shutdown()\nassert not ray.is_initialized()",
]


def _run_twice(nb: nbformat.NotebookNode, setup: str | None = None) -> None:
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    cells = [(i, c) for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and "NBVAL_SKIP" not in c.source]
    assert cells
    with client.setup_kernel():
        if setup is not None:
            client.execute_cell(nbformat.v4.new_code_cell(setup), 0)
        for _ in (1, 2):
            for index, cell in cells:
                client.execute_cell(cell, index)  # raises CellExecutionError on any failure
            assert wait_until_no_actors() == []


@pytest.mark.ray
@pytest.mark.slow
def test_driver_lifecycle_with_an_interrupt_runs_twice_in_one_kernel(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in LIFECYCLE])
    # the stop comes at the 100th episode: training is under way, whatever the start-up took
    _run_twice(nb, setup=f"CHECKPOINT_DIR = {str(tmp_path)!r}\nSTOP_AT_EPISODE = 100")
