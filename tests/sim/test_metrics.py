"""Metrics: Jain's index, percentiles, intervals, backlog and service differences."""

from __future__ import annotations

import math
import random

import pytest

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.metrics import (
    RequestRecord,
    ServiceLedger,
    all_active_interval,
    backlog_intervals,
    jain_index,
    max_backlogged_diff,
    percentile,
)
from sglang_fair.metrics.ledger import ClientTokens


def test_jain_index_bounds() -> None:
    assert jain_index([5, 5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([1, 2]) == pytest.approx(9 / 10)
    assert jain_index([]) == 1.0


@pytest.mark.parametrize("q", [0, 10, 50, 99, 100])
def test_percentile_matches_numpy(q: float) -> None:
    np = pytest.importorskip("numpy")  # the sim extra; the base install has no numpy
    xs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))
    assert math.isnan(percentile([], q))


def test_percentile_by_hand() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([10.0], 99) == 10.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)


def test_all_active_interval() -> None:
    assert all_active_interval({"a": (0.0, 10.0), "b": (2.0, 8.0), "c": (1.0, 12.0)}) == (2.0, 8.0)


def _rec(client: str, arrival: float, admitted: float) -> RequestRecord:
    return RequestRecord(0, 0, client, arrival, 1, 1, admitted=admitted, finished=admitted + 100)


def test_backlog_intervals_merge_overlaps() -> None:
    spans = backlog_intervals([_rec("a", 0, 2), _rec("a", 1, 3), _rec("a", 5, 6), _rec("b", 0, -1)], end=9)
    assert spans == {"a": [(0, 3), (5, 6)], "b": [(0, 9)]}


def _spans_by_sorting_events(recs: list[RequestRecord], end: float) -> dict[str, list[tuple[float, float]]]:
    """The definition, directly: sort every +1 (arrival) and -1 (admission) by time, arrivals first."""
    out: dict[str, list[tuple[float, float]]] = {}
    for client in {r.client for r in recs}:
        events = sorted([(r.arrival, -1) for r in recs if r.client == client]
                        + [(r.admitted if r.admitted >= 0 else end, 1) for r in recs if r.client == client])
        spans, depth, start = [], 0, 0.0
        for t, d in events:
            if depth == 0 and d < 0:
                start = t
            depth -= d
            if depth == 0 and t > start:
                spans.append((start, t))
        out[client] = spans
    return out


def test_backlog_intervals_equal_the_event_sort_on_random_records() -> None:
    rng = random.Random(3)
    ties = 0
    for _ in range(300):
        recs = []
        for _ in range(rng.randrange(1, 30)):
            arrival = float(rng.randrange(20))  # whole seconds: arrivals at an admission's instant occur
            wait = float(rng.randrange(5))
            recs.append(_rec(rng.choice("abc"), arrival, -1 if rng.random() < 0.1 else arrival + wait))
        ties += any(a.arrival == b.admitted for a in recs for b in recs if a.client == b.client)
        assert backlog_intervals(recs, end=30.0) == _spans_by_sorting_events(recs, 30.0)
    assert ties > 100  # the precondition: the tie rule was exercised


def test_max_backlogged_diff_only_counts_common_backlog() -> None:
    series = {"a": [10.0, 10.0, 10.0, 0.0], "b": [0.0, 5.0, 5.0, 50.0]}
    backlog = {"a": [(0.0, 4.0)], "b": [(1.0, 3.0)]}
    # both backlogged in windows 1 and 2: differences 5 then 10 -> 10
    assert max_backlogged_diff(series, backlog, 1.0) == pytest.approx(10.0)
    # weights: b has weight 0.5, so its service counts double
    assert max_backlogged_diff(series, backlog, 1.0, {"b": 0.5}) == pytest.approx(0.0)


def test_ledger_windows_and_totals() -> None:
    led = ServiceLedger(CostModel(w_e=1.0, w_q=3.0), window=2.0)
    led.book(0.5, "a", 0, requests=1, input_tokens=10, cached_tokens=6, extend_tokens=4)
    led.book(2.5, "a", 1, output_tokens=2)
    led.book(3.9, "b", 1, extend_tokens=1)
    assert led.series("a", "perceived") == [10, 6]  # w_e * 10 input, then w_q * 2 output
    assert led.series("a", "actual", until=5.0) == [4, 6, 0]
    assert led.total("a") == 16 and led.total("a", "perceived", 2.0, 4.0) == 6
    assert led.total("b", "actual") == 1 and led.total("b") == 0
    assert dict(led.worker_actual[1]) == {1: 7}
    assert led.tokens["a"] == ClientTokens(1, 10, 6, 4, 2) and led.clients == ["a", "b"]


def test_ledger_without_windows_keeps_totals_only() -> None:
    led = ServiceLedger(window=None)
    led.book(7.0, "a", output_tokens=5)
    assert led.total("a") == led.total("a", "actual") == 10.0
    with pytest.raises(ConfigError, match="totals only"):
        led.series("a")
    led.forget("a")
    assert led.total("a") == 0.0 and led.clients == []


def test_percentile_nearest_rank_returns_a_value_that_occurred() -> None:
    xs = [4.0, 1.0, 3.0, 2.0]
    assert percentile(xs, 50, nearest_rank=True) == 2.0 and percentile(xs, 50) == 2.5
    assert percentile(xs, 99, nearest_rank=True) == 4.0 and percentile(xs, 0, nearest_rank=True) == 1.0
    assert math.isnan(percentile([], 50, nearest_rank=True))
