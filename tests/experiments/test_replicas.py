"""The replicas figure: router replicas that share what they know, or not, against one router (tiny scale)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
from experiment_options import options

from sglang_fair.experiments import replicas
from sglang_fair.experiments.figures import FIGURES
from sglang_fair.experiments.protocol import Point, Protocol, run_point

TINY = Protocol(duration=24.0, warmup=4.0, cooldown=4.0)


def test_the_figure_runs_one_router_and_replicas_sharing_or_not() -> None:
    points = FIGURES["replicas"](options())
    configs = {(p.workload, p.dp, p.replicas, p.replica_share, p.replica_lag, p.policy) for p in points}
    routers = {(1, True, 0), (2, True, 0), (2, True, 32), (4, True, 0), (4, True, 32), (2, False, 0),
               (4, False, 0)}
    assert configs == ({("judge", d, *c, "dlpm_light") for d in (8, 16) for c in routers}
                       | {("weighted", d, *c, "dlpm") for d in (8, 16) for c in routers}
                       | {("weighted", d, 1, True, 0, "dlpm_light") for d in (8, 16)})
    assert {p.router for p in points} == {"fair_cache_aware"}


def test_keys_name_the_replicas_only_where_set() -> None:
    one = Point("judge", "s1", 8, router="fair_cache_aware", policy="dlpm_light")
    assert "replica" not in one.key()
    two = replace(one, replicas=2, replica_lag=32)
    assert two.key().endswith("|load=above|replicas=2|replica_lag=32")
    alone = replace(one, replicas=4, replica_share=False)
    assert alone.scheduler == "Fair cache-aware, 4 replicas not sharing"


def test_replicas_at_lag_0_route_as_one_router_and_the_table_reads_the_runs(tmp_path: Path) -> None:
    one = Point("judge", "s1", 2, router="fair_cache_aware", policy="dlpm_light")
    sharing = replace(one, replicas=2)
    alone = replace(one, replicas=2, replica_share=False)
    rows = {p: run_point(p, 0.5, TINY, seed=0) for p in (one, sharing, alone)}
    same = ("throughput", "cache_hit_rate", "clients_detail")
    assert {k: rows[sharing][k] for k in same} == {k: rows[one][k] for k in same}
    assert rows[alone]["clients_detail"] != rows[one]["clients_detail"]  # each replica routes alone
    text = replicas.table(list(rows.values()))
    assert "| judge S1 above | 2 | 2 replicas, not sharing |" in text and "one router | " in text
    pytest.importorskip("matplotlib")
    replicas.plot(list(rows.values()), tmp_path / "replicas.png")
    assert (tmp_path / "replicas.png").stat().st_size > 1000


def test_one_router_keeps_the_weighted_pair_apart() -> None:
    """The weighted workload's heavy pair, weights 4:1, on dlpm workers behind one router."""
    row = run_point(Point("weighted", "none", 2, router="fair_cache_aware", policy="dlpm"), 1.0, TINY, seed=0)
    entry = replicas.summarize([row])[0]
    assert entry["cell"] == "weighted" and entry["ratio"][0] > 2


def _row(dp: int, count: int, share: bool, thr: float, c0: float, c1: float) -> dict:
    p = Point("weighted", "none", dp, router="fair_cache_aware", policy="dlpm", replicas=count,
              replica_share=share)
    detail = {"c0": {"service": c0}, "c1": {"service": c1}, "c2": {"service": 1.0}}
    return {**asdict(p), "seed": 0, "throughput": thr, "cache_hit_rate": 0.5, "jain_index": 0.9,
            "well_behaved_p99_s": 1.0, "clients_detail": detail}


def test_summary_ratios() -> None:
    runs = [_row(8, 1, True, 1000.0, 40.0, 10.0), _row(8, 2, False, 900.0, 20.0, 20.0)]
    got = {e["name"]: e for e in replicas.summarize(runs)}
    assert list(got) == ["one router", "2 replicas, not sharing"]
    assert got["one router"]["ratio"] == [4.0] and got["2 replicas, not sharing"]["ratio"] == [1.0]
    assert got["2 replicas, not sharing"]["vs_one"] == pytest.approx(0.9)
