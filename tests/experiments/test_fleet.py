"""The fleet figure: the gateway against a load balancer over per-server routers (tiny scale)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
from experiment_options import options

from sglang_fair.experiments import fleet
from sglang_fair.experiments.figures import FIGURES
from sglang_fair.experiments.protocol import Point, Protocol, run_point

TINY = Protocol(duration=24.0, warmup=4.0, cooldown=4.0)


def test_the_figure_compares_the_gateway_with_servers_of_each_size() -> None:
    configs = {(p.dp, p.router, p.server_dp, p.balancer, p.eviction_feed)
               for p in FIGURES["fleet"](options()) if p.workload == "judge"}
    gateway = {(d, r, 0, "", True) for d in (8, 16)
               for r in ("fair_cache_aware", "cache_aware", "round_robin")}
    today = {(d, "fair_cache_aware", 0, "", False) for d in (8, 16)}
    servers = {(8, "per_server", 2, "round_robin", True), (8, "per_server", 2, "client_hash", True),
               (16, "per_server", 2, "round_robin", True), (16, "per_server", 8, "round_robin", True),
               (16, "per_server", 8, "client_hash", True)}  # no client hash over more servers than clients
    assert configs == gateway | today | servers
    assert {p.policy for p in FIGURES["fleet"](options())} == {"dlpm_light"}


def test_keys_of_points_without_servers_are_unchanged() -> None:
    assert Point("tot", "s1", 2, router="d2lpm").key() == (
        "workload=tot|scenario=s1|dp=2|preset=a100-llama8b|router=d2lpm|policy=lpm|clients=4|branches=2|"
        "q_u=0.0|q_w=0.0|load=above")
    assert Point("tot", dp=4, router="per_server", server_dp=2, balancer="client_hash").key().endswith(
        "|server_dp=2|balancer=client_hash")
    assert Point("tot", eviction_feed=False).key().endswith("|load=above|eviction_feed=False")
    assert Point("tot", dp=2, router="fair_cache_aware", policy="dlpm_light", eviction_feed=False).scheduler \
        == "Fair cache-aware, no eviction feed"


def test_one_server_is_the_gateway_and_the_table_reads_the_runs(tmp_path: Path) -> None:
    gateway = Point("judge", "s1", 4, router="fair_cache_aware", policy="dlpm_light")
    one = replace(gateway, router="per_server", server_dp=4, balancer="round_robin")
    two = replace(one, server_dp=2)
    rows = {p: run_point(p, 1.2, TINY, seed=0) for p in (gateway, one, two)}
    same = ("throughput", "jain_index", "cache_hit_rate", "well_behaved_p99_s", "clients_detail")
    assert {k: rows[one][k] for k in same} == {k: rows[gateway][k] for k in same}
    assert rows[two]["throughput"] > 0 and rows[two]["scheduler"] == "Per-server, RR LB"
    text = fleet.table([rows[gateway], rows[two]])
    assert "gateway: fair_cache_aware (default)" in text and "2 x 2: RR LB + fair_cache_aware" in text
    pytest.importorskip("matplotlib")
    from sglang_fair.experiments.paper_plots import render

    earlier = {k: v for k, v in rows[gateway].items() if k not in ("server_dp", "balancer", "eviction_feed")}
    render({"runs": [earlier, rows[two]], "figures": {"fleet": [gateway.key(), two.key()]}}, tmp_path)
    assert "| judge S1 above | 4 | 2 x 2: RR LB" in (tmp_path / "results_tables.md").read_text()
    assert (tmp_path / "img" / "fleet.png").stat().st_size > 1000


def _row(dp: int, router: str, thr: float, c0: float, server_dp: int = 0, balancer: str = "") -> dict:
    p = Point("qa", "s1", dp, router=router, policy="dlpm_light", server_dp=server_dp, balancer=balancer)
    detail = {"c0": {"service": c0}, **{f"c{i}": {"service": 10.0} for i in (1, 2, 3)}}
    return {**asdict(p), "seed": 0, "throughput": thr, "cache_hit_rate": 0.5, "jain_index": 0.9,
            "well_behaved_p99_s": 1.0, "clients_detail": detail}


def test_summary_ratios_against_the_gateway() -> None:
    runs = [_row(16, "per_server", 1500.0, 20.0, 8, "round_robin"), _row(8, "fair_cache_aware", 1000.0, 30.0),
            _row(16, "fair_cache_aware", 1800.0, 30.0), _row(16, "round_robin", 1600.0, 40.0)]
    got = {(e["dp"], e["name"]): e for e in fleet.summarize(runs)}
    assert [k for k in got] == [(8, fleet.DEFAULT), (16, fleet.DEFAULT), (16, "gateway: round_robin"),
                                (16, "2 x 8: RR LB + fair_cache_aware")]
    assert got[(16, "2 x 8: RR LB + fair_cache_aware")]["vs_gateway"] == pytest.approx(1500 / 1800)
    assert got[(8, fleet.DEFAULT)]["vs_gateway"] == 1.0
    assert got[(16, "2 x 8: RR LB + fair_cache_aware")]["c0_vs_wb"] == pytest.approx(2.0)
    assert got[(16, "gateway: round_robin")]["wb_vs_gateway"] == pytest.approx(1.0)
