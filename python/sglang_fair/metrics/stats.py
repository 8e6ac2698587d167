"""Fairness and latency statistics ([1] §6.1, [2] §5)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from sglang_fair.metrics.ledger import RequestRecord


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when equal, 1/n when one client has all."""
    if not values:
        return 1.0
    sq = sum(v * v for v in values)
    if sq == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * sq)


def percentile(values: Iterable[float], q: float, nearest_rank: bool = False) -> float:
    """The q-th percentile (0..100) with linear interpolation (numpy's default), or by the
    nearest-rank method (a value that occurred, never below the true one: the conservative choice for
    censored latencies); NaN if empty."""
    xs = sorted(values)
    if not xs:
        return math.nan
    if nearest_rank:
        return xs[max(1, math.ceil(q / 100 * len(xs))) - 1]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def all_active_interval(active: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    """[latest first arrival, earliest last completion] over clients: when all are active.

    ``active`` maps client -> (first arrival, last completion). The interval may be empty
    (start >= end) if some client finished before another started.
    """
    if not active:
        return 0.0, 0.0
    return max(a for a, _ in active.values()), min(b for _, b in active.values())


def backlog_intervals(requests: Iterable[RequestRecord], end: float) -> dict[str, list[tuple[float, float]]]:
    """Per client, the maximal intervals during which it had a request waiting (arrived, not admitted).

    This is "backlogged" in the sense of the fairness theorems ([1] §4.2, [2] §4): a client with only
    running requests cannot be given more service, so it does not count.
    """
    arrivals: defaultdict[str, list[float]] = defaultdict(list)
    admissions: defaultdict[str, list[float]] = defaultdict(list)
    for r in requests:
        arrivals[r.client].append(r.arrival)
        admissions[r.client].append(r.admitted if r.admitted >= 0 else end)
    return {client: _busy_spans(sorted(arr), sorted(admissions[client])) for client, arr in arrivals.items()}


def _busy_spans(arrivals: list[float], admissions: list[float]) -> list[tuple[float, float]]:
    """The maximal spans in which more requests arrived than were admitted (both lists ascending; the
    k-th admission is never before the k-th arrival). An arrival at the instant of an admission keeps
    the span open."""
    spans: list[tuple[float, float]] = []
    depth, start, i, n = 0, 0.0, 0, len(arrivals)
    for t in admissions:
        while i < n and arrivals[i] <= t:
            if depth == 0:
                start = arrivals[i]
            depth, i = depth + 1, i + 1
        depth -= 1
        if depth == 0 and t > start:
            spans.append((start, t))
    return spans


def max_backlogged_diff(
    series: Mapping[str, Sequence[float]],
    backlog: Mapping[str, list[tuple[float, float]]],
    window: float,
    weights: Mapping[str, float] | None = None,
) -> float:
    """Max over client pairs and intervals where both are backlogged of |W_i - W_j| (per weight).

    ``series`` is service per window; a window counts as backlogged for a client if it lies wholly
    inside one of the client's backlog intervals. The bound of [1] Thm 4.1 / [2] Thm 4.4 applies to
    this quantity (up to the window granularity).
    """
    weights = weights or {}
    n = max((len(s) for s in series.values()), default=0)
    busy = {c: _busy_windows(backlog.get(c, []), window, n) for c in series}
    clients = sorted(series)
    best = 0.0
    for a_i, a in enumerate(clients):
        for b in clients[a_i + 1:]:
            wa, wb = weights.get(a, 1.0), weights.get(b, 1.0)
            sa = list(series[a]) + [0.0] * (n - len(series[a]))
            sb = list(series[b]) + [0.0] * (n - len(series[b]))
            steps = ((busy[a][k] and busy[b][k], sa[k] / wa - sb[k] / wb) for k in range(n))
            best = max(best, max_drift(steps))
    return best


def max_drift(steps: Iterable[tuple[bool, float]]) -> float:
    """Largest |sum of increments| over a stretch of consecutive busy steps.

    ``steps`` are (busy, increment) pairs, e.g. whether two clients were both backlogged during a
    step and how much their (weighted) service difference grew in it. A step that is not busy ends
    the stretch; the answer is the widest range the running sum covers within one stretch.
    """
    best = lo = hi = cum = 0.0
    for busy, increment in steps:
        if busy:
            cum += increment
            lo, hi = min(lo, cum), max(hi, cum)
            best = max(best, hi - lo)
        else:
            lo = hi = cum = 0.0
    return best


def _busy_windows(spans: list[tuple[float, float]], window: float, n: int) -> list[bool]:
    busy = [False] * n
    for s, e in spans:
        for k in range(math.ceil(s / window - 1e-9), min(n, math.floor(e / window + 1e-9))):
            if (k + 1) * window <= e + 1e-9:
                busy[k] = True
    return busy
