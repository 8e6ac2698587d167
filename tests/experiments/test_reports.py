"""Smoke tests of the speed benchmark and the reproduction's figures/tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_fair.sim.config import ClusterSimConfig
from sglang_fair.sim.spec import RunSpec
from sglang_fair.speed.simulator import bench
from sglang_fair.workloads import WorkloadConfig


def test_bench_reports_speed() -> None:
    wl = WorkloadConfig(workload="tot", clients=2, rate=0.3, duration=4, depth=2, synthetic_data=True)
    out = bench(RunSpec(wl, ClusterSimConfig(dp=2)))
    assert out["requests"] > 0 and out["simulated_s"] > 0
    assert out["sim_requests_per_cpu_s"] > 0 and out["simulated_s_per_wall_s"] > 0


def test_render_writes_figures_and_generated_section(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from dataclasses import asdict

    from sglang_fair.experiments.paper_plots import render
    from sglang_fair.experiments.paper_tables import BEGIN, END
    from sglang_fair.experiments.protocol import KEYS, Point

    def row(p: Point, seed: int, thr: float) -> dict:
        return {**asdict(p), "key": p.key(), "seed": seed, "rate": 0.5, "scheduler": p.scheduler,
                **{k: 1.0 for k in KEYS}, "throughput": thr, "jain_index": 0.9}

    fig1 = [Point("tot", "s1", policy="lpm"), Point("tot", "s1", policy="dlpm", q_u=512.0)]
    fig7 = [Point("tot", "s1", d, router=r, policy=pol) for d in (1, 2) for r, pol in
            (("round_robin", "lpm"), ("d2lpm", "dlpm"))]
    runs = [row(p, s, 10.0 + s) for p in fig1 + fig7 for s in (0, 1, 2)]
    results = {"capacity": {"tot/s1/D1/x/B2": {"capacity": 0.3, "stable": 0.28, "unstable": 0.32,
                                               "trials": [[0.3, 0.01]], "cpu_s": 1.0}},
               "runs": runs, "figures": {"fig1": [p.key() for p in fig1], "fig7": [p.key() for p in fig7]}}
    (tmp_path / "results_tables.md").write_text(f"# R\n\nprose\n\n{BEGIN}\nold\n{END}\n\nmore prose\n")
    render(results, tmp_path)
    text = (tmp_path / "results_tables.md").read_text()
    assert "prose" in text and "more prose" in text and "old" not in text
    assert "| LPM | - |" in text and "| DLPM | 512 |" in text
    assert "11.0 [10.0-12.0]" in text  # mean [min-max] over the three seeds
    assert "**0.3**" in text  # the capacity table
    assert (tmp_path / "img" / "fig1.png").stat().st_size > 1000
    assert (tmp_path / "img" / "fig7.png").stat().st_size > 1000
    nested = tmp_path / "evidence" / "results_tables.md"  # the docs' layout: tables beside the evidence
    nested.parent.mkdir()
    render(results, tmp_path, nested)
    assert "![fig1](../img/fig1.png)" in nested.read_text() and "![fig1](img/fig1.png)" in text


def test_render_shows_the_queue_figures_of_fig1mem_only(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from dataclasses import asdict

    from sglang_fair.experiments.paper_plots import render
    from sglang_fair.experiments.paper_tables import BEGIN, END
    from sglang_fair.experiments.protocol import KEYS, Point

    pts = {"fig1": [Point("tot", "s1", preset="a10-llama3b", policy="vtc")],
           "fig1mem": [Point("tot", "s1", preset="a10-llama8b", policy="vtc")]}
    runs = [{**asdict(p), "key": p.key(), "seed": s, "rate": 0.5, "scheduler": p.scheduler,
             **{k: 1.0 for k in KEYS}, "mean_wait_s": 20.0 + s, "mean_decode_batch": 7.0}
            for ps in pts.values() for p in ps for s in (0, 1, 2)]
    (tmp_path / "results_tables.md").write_text(f"{BEGIN}\n{END}\n")
    render({"runs": runs, "figures": {k: [p.key() for p in ps] for k, ps in pts.items()}}, tmp_path)
    text = (tmp_path / "results_tables.md").read_text()
    fig1, fig1mem = text.split("### Fig. 1 under memory pressure")
    assert "mean_wait_s" not in fig1 and "mean_wait_s | mean_decode_batch" in fig1mem
    assert "21.0 [20.0-22.0] | 7.0 [7.0-7.0]" in fig1mem
    assert (tmp_path / "img" / "fig1mem.png").stat().st_size > 1000


def test_render_orders_loads_and_splits_the_load_sweep_per_d(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from dataclasses import asdict

    from sglang_fair.experiments.paper_plots import render
    from sglang_fair.experiments.paper_tables import BEGIN, END
    from sglang_fair.experiments.protocol import KEYS, Point

    pts = {"fig1": [Point("tot", "s1", policy="vtc", load=ld) for ld in ("above", "below")],
           "loads": [Point("qa", "s1", d, router="d2lpm", policy="dlpm", load=ld)
                     for d in (1, 2) for ld in ("below", "near")],
           "qw_locality": [Point("qa", "s1", 2, router="preble", policy="preble", load="near")]
           + [Point("qa", "s1", 2, router="d2lpm", policy="dlpm", q_w=q, load="near") for q in (0, 1e3, 1e6)]}
    runs = [{**asdict(p), "key": p.key(), "seed": s, "rate": 0.5, "scheduler": p.scheduler,
             **{k: 1.0 for k in KEYS}} for ps in pts.values() for p in ps for s in (0, 1, 2)]
    (tmp_path / "results_tables.md").write_text(f"{BEGIN}\n{END}\n")
    render({"runs": runs, "figures": {k: [p.key() for p in ps] for k, ps in pts.items()}}, tmp_path)
    text = (tmp_path / "results_tables.md").read_text()
    fig1 = text.split("### Fig. 1")[1].split("###")[0]
    assert fig1.index("| below | VTC |") < fig1.index("| above | VTC |")  # by load, not as defined
    assert "| 1,000 |" in text and "| 16,384 (default) |" in text  # qw_locality's q_w column
    for stem in ("loads_d1", "loads_d2", "qw_locality_d2"):
        assert f"![{stem}](img/{stem}.png)" in text
        assert (tmp_path / "img" / f"{stem}.png").stat().st_size > 1000
    assert not (tmp_path / "img" / "loads.png").exists()


def test_scheduler_names_say_when_a_router_has_other_than_its_usual_workers() -> None:
    from sglang_fair.experiments.protocol import Point

    names = [Point("tot", dp=2, router=r, policy=p).scheduler for r, p in (
        ("cache_aware", "lpm"), ("cache_aware", "dlpm_light"), ("fair_cache_aware", "dlpm_light"),
        ("d2lpm", "dlpm"), ("round_robin", "lpm"), ("round_robin", "vtc"), ("round_robin", "dlpm_light"))]
    assert names == ["Cache-aware", "Cache-aware + dlpm_light", "Fair cache-aware", "D²LPM", "RR+LPM", "VTC",
                     "RR + dlpm_light"]
    assert Point("tot", dp=4, router="per_server", server_dp=2, balancer="client_hash").scheduler == \
        "Per-server, client-hash LB"
    assert Point("tot", dp=1).scheduler == "LPM"

