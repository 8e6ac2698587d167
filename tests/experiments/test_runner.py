"""The experiments' one runner and the paper's figure registry."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from experiment_options import options

from sglang_fair.experiments.figures import FIGURES, experiments
from sglang_fair.experiments.runner import Task, load_json, run_tasks, save_json


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_come_back_in_task_order_and_each_is_reported_once(jobs: int) -> None:
    tasks = [Task(x, math.sqrt, (x,)) for x in (16.0, 4.0, 9.0)]
    seen: dict[float, Any] = {}
    out = run_tasks(tasks, jobs, lambda task, r: seen.setdefault(task.key, r))
    assert out == [4.0, 2.0, 3.0]
    assert seen == {16.0: 4.0, 4.0: 2.0, 9.0: 3.0}


def test_results_files_are_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "r.json"
    assert load_json(path, {"none": 1}) == {"none": 1}
    save_json(path, {"runs": [1, 2]})
    assert path.read_text() == '{"runs":[1,2]}' and load_json(path, None) == {"runs": [1, 2]}
    assert not path.with_suffix(".tmp").exists()


def test_each_figure_builds_its_points_from_theoptions() -> None:
    figs = experiments(options())
    assert list(figs) == list(FIGURES)
    assert len(figs["fig1"]) == 6  # LPM, VTC and DLPM at four quanta, one load
    assert {p.q_u for p in figs["fig1"]} == {0.0, 1024, 4096, 16384, 65536}
    assert {p.load for p in figs["fig12"]} == {"below", "near", "above"}
    few = experiments(options("--only", "fig1,fig11", "--qus", "4096", "--clients", "5"))
    assert list(few) == ["fig1", "fig11"] and len(few["fig1"]) == 3 and len(few["fig11"]) == 3


def test_unknown_figures_and_loads_are_refused() -> None:
    with pytest.raises(SystemExit):
        options("--only", "fig99")
    with pytest.raises(SystemExit):
        options("--fig-loads", "overload")
