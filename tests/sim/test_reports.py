"""Smoke tests of the speed benchmark and the reproduction's figures/tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_fair.sim.bench import bench
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.workloads import WorkloadConfig


def test_bench_reports_speed() -> None:
    wl = WorkloadConfig(workload="tot", clients=2, rate=0.3, duration=4, depth=2, data_dir="/nonexistent")
    out = bench(wl, ClusterSimConfig(dp=2), EngineConfig())
    assert out["requests"] > 0 and out["simulated_s"] > 0
    assert out["sim_requests_per_cpu_s"] > 0 and out["simulated_s_per_wall_s"] > 0


def test_render_writes_figures_and_generated_section(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from sglang_fair.sim.paper_plots import BEGIN, END, render

    base = {"throughput": 10.0, "jain_index": 0.9, "well_behaved_p50_s": 1.0, "cache_hit_rate": 0.5}
    results = {
        "fig1": {"rows": [{"policy": "lpm", "q_u": 0.0, **base}, {"policy": "dlpm", "q_u": 512.0, **base}],
                 "duration": 5, "seed": 0, "wall_s": 1},
        "fig7": {"rows": [{"workload": "tot", "scenario": "s1", "dp": d, "scheduler": s, **base}
                          for d in (1, 2) for s in ("RR+LPM", "D²LPM")],
                 "duration": 5, "seed": 0, "wall_s": 1},
    }
    (tmp_path / "results.md").write_text(f"# R\n\nprose\n\n{BEGIN}\nold\n{END}\n\nmore prose\n")
    render(results, tmp_path)
    text = (tmp_path / "results.md").read_text()
    assert "prose" in text and "more prose" in text and "old" not in text
    assert "| lpm |" in text.replace("  ", " ")
    assert (tmp_path / "img" / "fig1.png").stat().st_size > 1000
    assert (tmp_path / "img" / "fig7.png").stat().st_size > 1000
