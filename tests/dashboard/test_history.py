"""The fairness page's history: service shares per interval, the backlogged gap, hit rates, bounds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.dashboard.bound import stated_bound
from sglang_fair.dashboard.history import OTHERS, History
from sglang_fair.metrics.stats import max_backlogged_diff


def fill(history: History, rows: list[dict[str, tuple[float, int]]], t0: float = 1000.0) -> None:
    """Samples every ``interval_s`` from ``t0``; each row: client -> (service total, waiting)."""
    for k, row in enumerate(rows):
        figures = {c: {"service": s, "waiting": w} for c, (s, w) in row.items()}
        history.add(t0 + k * history.interval_s, figures)


def test_shares_per_interval_with_the_rest_as_others_and_ages_from_now() -> None:
    h = History(window_s=10, interval_s=2)
    fill(h, [{"a": (0, 1), "b": (0, 1), "c": (0, 0)}, {"a": (30, 1), "b": (10, 1), "c": (0, 0)},
             {"a": (60, 1), "b": (20, 1), "c": (10, 0)}])
    shares = h.shares(now=1004.0, top=2)
    assert shares["clients"] == {"a": [0.75, 0.6], "b": [0.25, 0.2]}
    assert shares[OTHERS] == [0.0, 0.2] and shares["age_s"] == [2.0, 0.0] and shares["rate"] == [20.0, 25.0]


def test_a_total_that_falls_is_no_service_and_old_samples_drop_out() -> None:
    h = History(window_s=4, interval_s=2)  # at most 3 samples
    fill(h, [{"a": (50, 0)}, {"a": (80, 0)}, {"a": (5, 0)}, {"a": (15, 0)}])  # a restart after the 2nd
    assert len(h.samples) == 3 and h.deltas() == [{"a": 0.0}, {"a": 10.0}]


def test_the_gap_grows_only_while_both_clients_wait_and_is_per_weight() -> None:
    rows = [{"a": (10 * k, 1), "b": (5 * k, 1)} for k in range(6)]
    h = History(window_s=100, interval_s=1)
    fill(h, rows)
    assert h.gap()["value"] == 25.0 and h.gap()["clients"] == ["a", "b"]
    assert h.gap({"a": 2.0})["value"] == 0.0  # a's service per unit of weight equals b's
    rows[3] = {"a": (30, 0), "b": (15, 1)}  # a has nothing waiting at the 4th sample: two stretches
    h2 = History(window_s=100, interval_s=1)
    fill(h2, rows)
    assert h2.gap()["value"] == 10.0 and h2.gap()["backlogged"] == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50), st.booleans(), st.booleans()),
                min_size=2, max_size=30))
def test_the_gap_is_max_backlogged_diff_of_the_simulators_metrics_on_the_same_windows(
        steps: list[tuple[int, int, bool, bool]]) -> None:
    """Sample k at time k; a client is backlogged over [j0, j1] for each run of samples that show
    requests waiting: the page's gap is then exactly the metric the simulator and the bench report."""
    h = History(window_s=1000, interval_s=1)
    totals = {"a": 0, "b": 0}
    waits: dict[str, list[bool]] = {"a": [], "b": []}
    for da, db, wa, wb in steps:
        totals["a"] += da
        totals["b"] += db
        waits["a"].append(wa)
        waits["b"].append(wb)
        h.add(float(len(h.samples)), {c: {"service": totals[c], "waiting": int(waits[c][-1])}
                                      for c in totals})
    series = {c: [d[c] for d in h.deltas()] for c in totals}
    backlog = {c: runs(waits[c]) for c in totals}
    expected = max_backlogged_diff(series, backlog, 1.0, {"b": 1.5})
    assert math.isclose(h.gap({"b": 1.5})["value"], round(expected, 1))


def runs(flags: list[bool]) -> list[tuple[float, float]]:
    """The maximal runs of true flags as intervals [first index, last index]."""
    out, start = [], None
    for k, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = k
        elif not flag and start is not None:
            out.append((float(start), float(k - 1)))
            start = None
    return out


def test_hit_rates_are_over_the_window() -> None:
    h = History(window_s=100, interval_s=1)
    h.add(0.0, {"a": {"input_tokens": 1000, "cached_tokens": 0}})
    h.add(1.0, {"a": {"input_tokens": 1400, "cached_tokens": 300}, "b": {"input_tokens": 0}})
    assert h.hit_rates() == {"a": 0.75}


@pytest.mark.parametrize(("args", "value", "source"), [
    (("dlpm", 0, 1, 2, 2048), 2 * (3 * 2048 + 4096), "[1] Thm 4.1"),  # 0: the policy's default units
    (("dlpm_light", 0, 1, 2, 2048), None, None),  # a quantum in time, not published yet
    (("dlpm", 1000, 1, 2, 100), 2 * (300 + 1000), "[1] Thm 4.1"),
    (("vtc", 0, 1, 2, 100), 400, "[2] Thm 4.4"),
    (("dlpm_light", 100, 1, 2, 100, 4, "fair_cache_aware"), 4 * 2 * (300 + 100), "[1] Thm 5.1"),
    (("dlpm_light", 100, 1, 2, 100, 4, "round_robin"), None, None),
    (("lpm", 0, 1, 2, 100), None, None),
    (("dlpm", 0, 1, 2, None), None, None),
])
def test_the_stated_bound_follows_the_policy_and_the_router(args: tuple, value: float | None,
                                                            source: str | None) -> None:
    bound = stated_bound(*args)
    assert (bound["value"], bound["source"]) == (value, source) and bound["formula"]
