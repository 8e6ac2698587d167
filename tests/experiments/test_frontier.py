"""The frontier's matrix, per-window metrics and verdicts (experiments/frontier*.py) on hand-built inputs,
and one cell run end to end on a short protocol."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from sglang_fair.core.cost import CostModel
from sglang_fair.experiments.frontier import DEFAULT, PAIRS, PROTOCOL, Cell, cells, run_pair, variant
from sglang_fair.experiments.frontier_metrics import light_p99, weight_ratios, window_floor
from sglang_fair.experiments.frontier_report import by_seed, summary, table, verdicts
from sglang_fair.metrics.ledger import RequestRecord, ServiceLedger


def test_the_matrix_covers_every_operating_point_the_issue_names() -> None:
    full = cells()
    assert {c.dp for c in full} == {2, 4, 8} and {c.max_running for c in full} == {8, 32, 256}
    assert {c.preset for c in full} == {"a100-llama8b", "cpu-tiny-llama"}
    fig7 = {(c.workload, c.scenario) for c in full if c.workload in ("tot", "judge", "qa")}
    assert len(fig7) == 6 and {c.load for c in full if c.workload == "tot"} == {"near", "above"}
    assert {"arena", "flood", "weighted", "sysprompt", "groups"} <= {c.workload for c in full}
    assert len(set(PAIRS)) == len(PAIRS) == 37 and DEFAULT in PAIRS
    assert len({c.name() for c in full}) == len(full)  # names key the results


def result(service: dict[str, list[float]], waiting: dict[str, list[tuple[float, float]]],
           weights: dict[str, float] | None = None) -> Any:
    """A RunResult-like object: per-client actual service per 20-s window from t=0, and requests that
    wait over the given spans (arrival, admission)."""
    ledger = ServiceLedger(CostModel(), window=20.0)
    for client, per_window in service.items():
        for k, units in enumerate(per_window):
            ledger.book(20.0 * k + 1, client, requests=1, input_tokens=0, cached_tokens=0,
                        extend_tokens=int(units), output_tokens=0)
    requests = []
    for client, spans in waiting.items():
        for a, b in spans:
            rec = RequestRecord(len(requests), 0, client, a, 10, 1)
            rec.admitted = b
            requests.append(rec)
    return SimpleNamespace(ledger=ledger, requests=requests, end_time=200.0, weights=weights or {})


def test_window_floor_is_the_least_backlogged_share_against_their_mean() -> None:
    res = result({"a": [100, 100, 100], "b": [100, 100, 20], "c": [0, 0, 0]},
                 {"a": [(0, 60)], "b": [(0, 60)], "c": [(0, 10)]})
    assert window_floor(res, [(0, 20), (20, 40), (40, 60)]) == pytest.approx(20 / 60, abs=1e-4)
    # c is not backlogged through any window: its nothing does not count
    assert window_floor(res, [(0, 20), (20, 40)]) == 1.0
    weighted = result({"a": [400], "b": [100]}, {"a": [(0, 20)], "b": [(0, 20)]}, {"a": 4.0})
    assert window_floor(weighted, [(0, 20)]) == 1.0  # 4:1 with weights 4:1 is fair
    alone = result({"a": [100]}, {"a": [(0, 20)]})
    assert window_floor(alone, [(0, 20)]) is None  # nobody to compare with


def test_weight_ratios_and_light_latency() -> None:
    res = result({"c0": [400, 300], "c1": [100, 0]}, {})
    assert weight_ratios(res, [(0, 20), (20, 40)]) == [4.0, None]
    recs = [RequestRecord(i, 0, "l1", 70.0 + i, 10, 1) for i in range(3)]
    for r, done in zip(recs, (71.0, 75.0, -1.0), strict=True):
        r.finished = done
    res = SimpleNamespace(requests=recs, end_time=100.0)
    # the unfinished one counts until the end
    assert light_p99(res, ("l1",), PROTOCOL) == pytest.approx(27.52, abs=0.01)


def row(cell: str, pair: str, thr: float, jain: float, floor: float | None = None, **kw: Any) -> dict:
    router, policy = pair.split(":")
    return {"cell": cell, "router": router, "policy": policy, "throughput": thr, "jain_index": jain,
            "window_floor": floor, "well_behaved_p99_s": 1.0, **kw}


def test_verdicts_judge_the_default_against_the_frontier() -> None:
    ours = "fair_cache_aware:dlpm_light"
    rows = [row("x", "cache_aware:lpm", 100.0, 0.70), row("x", "d2lpm:dlpm", 97.0, 0.90),
            row("x", "round_robin:fcfs", 80.0, 0.99), row("x", ours, 97.5, 0.89, 0.6),
            row("y", "cache_aware:lpm", 100.0, 0.70),
            row("y", ours, 90.0, 0.95, 0.4, weight_ratios=[4.0, 5.1])]
    vs = {v["cell"]: v for v in verdicts(rows, "fair_cache_aware:dlpm_light")}
    assert vs["x"]["misses"] == [] and vs["x"]["jain_need"] == pytest.approx(0.88)  # d2lpm is within 0.97x
    assert vs["y"]["misses"] == ["throughput", "floor", "weights"]
    text = summary(list(vs.values()))
    assert "every target met in 1;" in text and "| y | cache_aware:lpm | 0.900 |" in table(list(vs.values()))


def test_the_light_client_target_compares_with_the_earlier_default() -> None:
    now = [row("f", "cache_aware:lpm", 10.0, 0.3), row("f", "fair_cache_aware:dlpm_light", 10.0, 0.3,
                                                       light_p99_s=1.5)]
    before = [row("f", "fair_cache_aware:dlpm_light", 9.0, 0.3, light_p99_s=1.2)]
    [v] = verdicts(now, "fair_cache_aware:dlpm_light", before)
    assert v["misses"] == ["light"] and v["light_p99_today"] == 1.2


def test_one_cell_runs_every_figure_on_a_short_protocol() -> None:
    short = variant(PROTOCOL, duration=60.0, warmup=20.0, cooldown=10.0)
    cell = Cell("weighted", "none", 2, "cpu-tiny-llama", 8, None)
    out = run_pair(cell, DEFAULT, 1.0, short)
    assert out["cell"] == "weighted D=2 M=8 CPU" and out["throughput"] > 0
    assert len(out["weight_ratios"]) == 2 and all(3.0 < r < 5.0 for r in out["weight_ratios"])


def test_seeds_of_a_pair_merge_into_means_and_the_worst_window() -> None:
    rows = [row("x", "fair_cache_aware:dlpm_light", 90.0, 0.8, 0.7, seed=0, weight_ratios=[4.0]),
            row("x", "fair_cache_aware:dlpm_light", 110.0, 0.9, 0.4, seed=1, weight_ratios=[3.0]),
            row("x", "cache_aware:lpm", 100.0, 0.7)]
    [v] = verdicts(rows, "fair_cache_aware:dlpm_light")
    assert v["throughput_ratio"] == 1.0 and v["jain"] == pytest.approx(0.85)
    assert v["floor"] == 0.4 and v["ratios"] == (3.0, 4.0) and "floor" in v["misses"]


def test_by_seed_judges_each_seed_against_the_pairs_that_ran_it() -> None:
    """The default meets the throughput target at seed 0 and misses it at seed 1: judged per seed that
    shows; merged, the seeds' means hide it (the negative control)."""
    ours = "fair_cache_aware:dlpm_light"
    rows = [row("x", ours, 110.0, 0.9, seed=0), row("x", "cache_aware:lpm", 99.0, 0.9, seed=0),
            row("x", ours, 90.0, 0.9, seed=1), row("x", "cache_aware:lpm", 100.0, 0.9, seed=1)]
    text = by_seed(rows, ours)
    assert text.startswith("seed 0: cells: 1; every target met in 1;")
    assert "seed 1: cells: 1; every target met in 0;" in text
    assert "every target met in 1;" in summary(verdicts(rows, ours))  # merged: 100 against 99.5


def test_contenders_are_the_default_the_fastest_and_the_fastest_fair_pair() -> None:
    from sglang_fair.experiments.frontier import contenders

    rows = [row("x", f"r{i}:p", 100.0 - i, 0.5, floor=0.1) for i in range(5)]
    rows += [row("x", "d2lpm:dlpm", 50.0, 0.9, 0.9), row("x", "fair_cache_aware:dlpm_light", 80.0, 0.8, 0.8)]
    assert contenders(rows) == {("r0", "p"), ("r1", "p"), ("r2", "p"), ("fair_cache_aware", "dlpm_light")}
    rows[-1]["throughput"] = 40.0  # the default itself is no longer the fastest fair pair
    assert ("d2lpm", "dlpm") in contenders(rows)
