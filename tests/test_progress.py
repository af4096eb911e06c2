"""The training progress bar: its end states, in HTML (notebooks) and as text (terminals)."""

from __future__ import annotations

import pytest

import rlkit.notebook.progress
from rlkit.notebook.progress import COLORS, ProgressBar, bar_html


def test_a_solved_run_ends_full_and_green_with_its_final_evaluation():
    out = bar_html("DQN", 25_000, 100_000, 20.0, {"eval": "500"}, "done")
    assert f"background: {COLORS['done']}; width: 100.0%" in out
    assert "25,000 / 100,000 env steps (solved)" in out and "eval=500" in out
    assert "1,250 steps/s" in out


def test_a_stopped_run_ends_red_where_it_stopped():
    out = bar_html("SAC", 5_000, 20_000, 10.0, {}, "stopped")
    assert f"background: {COLORS['stopped']}; width: 25.0%" in out and "(stopped)" in out


def test_a_run_that_used_its_whole_budget_ends_green_without_claiming_solved():
    out = bar_html("DQN", 100_000, 100_000, 50.0, {"eval": "300"}, "done")
    assert "width: 100.0%" in out and "(solved)" not in out


def test_text_is_escaped_and_bad_states_are_refused():
    assert "&lt;b&gt;" in bar_html("<b>", 1, 2, 1.0, {}, "running")
    with pytest.raises(ValueError, match="state='green' must be one of"):
        bar_html("DQN", 1, 2, 1.0, {}, "green")


class _Handle:
    def __init__(self):
        self.shown = []

    def update(self, obj):
        self.shown.append(obj.data)


def test_close_updates_the_display_with_the_end_state():
    for solved, state in ((True, "done"), (False, "stopped")):
        bar = ProgressBar(False, 10_000, 0, "DQN")
        handle = bar.handle = _Handle()
        bar.update(4_000, eval="-300")
        bar.close(solved, eval="-150")
        assert f'data-state="{state}"' in handle.shown[-1] and "eval=-150" in handle.shown[-1]
        assert 'data-state="running"' in handle.shown[0]
        bar.close(solved)  # a second close draws nothing more
        assert len(handle.shown) == 2


def test_a_running_bar_redraws_at_most_every_min_redraw_s_but_always_draws_its_end(
        monkeypatch):
    # an interval no loaded machine can overrun: the 20 reports below all fall inside it
    monkeypatch.setattr(rlkit.notebook.progress, "MIN_REDRAW_S", 3600.0)
    bar = ProgressBar(False, 10_000, 0, "DQN")
    handle = bar.handle = _Handle()
    for step in range(100, 2_100, 100):  # 20 reports within MIN_REDRAW_S
        bar.update(step)
    assert len(handle.shown) == 1 and "100 / 10,000" in handle.shown[0]
    bar.close(False)
    assert len(handle.shown) == 2 and "2,000 / 10,000" in handle.shown[1]


def test_the_terminal_bar_ends_at_its_total_when_solved(capsys):
    bar = ProgressBar(True, 10_000, 0, "DQN")  # pytest is not a notebook: a tqdm text bar
    assert bar.handle is None and bar.text_bar is not None
    bar.update(3_000, eval="500")
    text_bar = bar.text_bar
    bar.close(True)
    assert text_bar.total == 3_000 and bar.text_bar is None
