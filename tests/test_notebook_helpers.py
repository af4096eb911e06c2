"""The notebooks' printing and drawing helpers: configs wrapped between fields, resources in GiB,
a run's timeline."""

import pytest

from rlkit.algos.dqn import DQNConfig
from rlkit.notebook.source import config_text, resources_text


def test_config_text_wraps_between_fields_only():
    config = DQNConfig(hidden=(256, 256))
    text = config_text(config, width=60)
    lines = text.splitlines()
    assert lines[0].startswith("DQNConfig(") and text.endswith(")")
    assert all(len(line) <= 60 for line in lines), lines
    # every field appears whole on one line, so nothing is cut mid-value
    assert any("hidden=(256, 256)," in line for line in lines)
    assert " ".join(line.strip() for line in lines) == repr(config)


def test_resources_text_reads_bytes_as_gib_and_drops_node_entries():
    text = resources_text({"CPU": 2.0, "memory": 3 * 2**30, "object_store_memory": 2**30,
                           "node:10.0.0.5": 1.0, "node:__internal_head__": 1.0})
    assert text == "2 CPUs, 0 GPUs, 3.0 GiB memory, 1.0 GiB object store"


def test_results_are_written_at_the_repository_root():
    """Notebooks save their results to <repo>/results (README reads them there), wherever the
    module that finds the root sits in the package."""
    from pathlib import Path

    from rlkit.core import metrics

    root = metrics.repo_root()
    assert (root / "rlkit" / "__init__.py").exists() and (root / "notebooks").is_dir()
    assert root == Path(__file__).resolve().parents[1]


def test_a_timeline_draws_a_lane_per_role_in_order_and_its_busy_fractions_add_up():
    import matplotlib

    matplotlib.use("Agg")
    from rlkit.core.timeline import Span
    from rlkit.notebook.timeline_plot import busy_fractions, lane_order, plot_timeline

    spans = [Span("worker 10", "fragment", 0.0, 1.0), Span("worker 2", "fragment", 0.5, 2.0),
             Span("learner", "train", 1.0, 3.0), Span("driver", "fragment", 1.0, 1.1),
             Span("evaluator", "evaluation", 2.0, None)]
    assert lane_order({s.role for s in spans}) == ["driver", "learner", "evaluator", "worker 2",
                                                   "worker 10"]
    assert busy_fractions(spans, 4.0) == pytest.approx({
        "driver": 0.025, "learner": 0.5, "evaluator": 0.5, "worker 2": 0.375,
        "worker 10": 0.25})  # the evaluator's call, unfinished, counts to the end
    ax = plot_timeline(spans, wall_seconds=4.0)
    assert [t.get_text() for t in ax.get_yticklabels()] == lane_order({s.role for s in spans})
    bars = [c for c in ax.collections if len(c.get_paths())]
    assert sum(len(c.get_paths()) for c in bars) == 5  # one bar per span
    assert ax.get_xlim() == (0.0, 4.0)


def test_sixteen_lanes_stay_legible_at_the_default_width():
    """A timeline of 16 roles (the most the series draws): 8 inches wide (fits JupyterLab's
    output area unshrunk, which the browser test checks), labels of 8 pt, and lanes far enough
    apart that neighbouring labels never overlap (issue 41)."""
    import matplotlib

    matplotlib.use("Agg")
    from rlkit.core.timeline import Span
    from rlkit.notebook.timeline_plot import plot_timeline

    spans = [Span(f"worker {i}", "fragment", 0.1 * i, 0.5) for i in range(14)]
    spans += [Span("driver", "fragment", 0.0, 0.1), Span("learner", "train", 0.0, 2.0)]
    ax = plot_timeline(spans, 2.0)
    fig = ax.figure
    fig.canvas.draw()
    assert fig.get_figwidth() <= 8.0
    labels = ax.get_yticklabels()
    assert len(labels) == 16 and all(t.get_fontsize() >= 8 for t in labels)
    boxes = sorted((t.get_window_extent() for t in labels), key=lambda b: b.y0)
    assert all(lower.y1 <= upper.y0 for lower, upper in zip(boxes, boxes[1:]))  # no overlap
