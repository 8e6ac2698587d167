"""The capacity finder against hand-checkable queues (experiments/capacity.py)."""

from __future__ import annotations

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.experiments.capacity import CapacitySearch, backlog_growth, find_capacity
from sglang_fair.metrics.ledger import ProgramRecord, RequestRecord


def _fifo(rate: float, service: float, duration: float, calls: int = 1
          ) -> tuple[list[ProgramRecord], list[RequestRecord]]:
    """D/D/1: a program of ``calls`` calls every 1/rate s, one server, each call ``service`` s, FIFO."""
    programs, requests, free, rid = [], [], 0.0, 0
    for i in range(int(duration * rate)):
        t = i / rate
        programs.append(ProgramRecord(i, "c0", t, calls, False, "e2e"))
        for _ in range(calls):
            free = max(free, t) + service
            requests.append(RequestRecord(rid, i, "c0", t, 10, 10, finished=free))
            rid += 1
    return programs, requests


def test_growth_is_zero_below_and_one_minus_mu_over_lambda_above() -> None:
    progs, reqs = _fifo(rate=1.0, service=0.5, duration=200)  # rho = 0.5: nothing queues
    assert backlog_growth(progs, reqs, 50, 150) == pytest.approx(0.0, abs=0.011)
    progs, reqs = _fifo(rate=4.0, service=0.5, duration=200)  # mu = 2, lambda = 4: half is left over
    assert backlog_growth(progs, reqs, 50, 150) == pytest.approx(0.5, abs=0.01)
    progs, reqs = _fifo(rate=1.0, service=0.4, duration=200, calls=5)  # 5 calls x 0.4 s = 2 s per program
    assert backlog_growth(progs, reqs, 50, 150) == pytest.approx(0.5, abs=0.01)


def test_growth_of_a_window_with_no_arrival_is_zero_and_empty_window_is_refused() -> None:
    progs, reqs = _fifo(rate=1.0, service=0.5, duration=10)
    assert backlog_growth(progs, reqs, 20, 30) == 0.0
    with pytest.raises(ConfigError):
        backlog_growth(progs, reqs, 5, 5)


@pytest.mark.parametrize("service,start", [(0.5, 1.0), (0.5, 16.0), (0.125, 0.3)])
def test_bisection_finds_the_d_d_1_capacity(service: float, start: float) -> None:
    def measure(rate: float) -> float:
        progs, reqs = _fifo(rate, service, duration=300)
        return backlog_growth(progs, reqs, 60, 300)

    res = find_capacity(measure, CapacitySearch(start=start, precision=0.02, max_runs=20))
    mu = 1 / service  # stable up to mu; growth 0.05 at mu / 0.95
    assert res.stable <= mu / 0.95 * 1.01 and res.unstable >= mu * 0.99
    assert mu * 0.98 <= res.capacity <= mu / 0.95 * 1.02
    assert all(g <= 0.05 for r, g in res.trials if r <= res.stable)


def test_a_search_that_never_overloads_says_so() -> None:
    with pytest.raises(ConfigError, match="still stable"):
        find_capacity(lambda rate: 0.0, CapacitySearch(start=1.0, max_runs=4))
    with pytest.raises(ConfigError):
        CapacitySearch(threshold=1.5)
