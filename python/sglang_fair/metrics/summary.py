"""One run's headline numbers: the JSON object of ``sglang-fair sim --json`` (its keys are stable)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.metrics import steady
from sglang_fair.metrics.ledger import ProgramRecord, RequestRecord, ServiceLedger
from sglang_fair.metrics.stats import (
    all_active_interval,
    backlog_intervals,
    jain_index,
    max_backlogged_diff,
    percentile,
)


@dataclass
class RunResult:
    """Everything a simulation recorded (the simulator fills it; metrics only read it)."""

    requests: list[RequestRecord]
    programs: list[ProgramRecord]
    ledger: ServiceLedger
    end_time: float
    workers: int
    weights: Mapping[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    steps: int = 0
    decode_plans: list[tuple[float, int, int]] = field(default_factory=list)  # (start, batch, steps)


def _num(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 6)


def client_activity(result: RunResult) -> dict[str, tuple[float, float]]:
    """Per client: (first program arrival, last program completion, or the end if unfinished)."""
    act: dict[str, tuple[float, float]] = {}
    for p in result.programs:
        end = p.finished if p.finished >= 0 else result.end_time
        a, b = act.get(p.client, (p.arrival, end))
        act[p.client] = (min(a, p.arrival), max(b, end))
    return act


def summarize(result: RunResult, window: tuple[float, float] | None = None,
              latency_window: tuple[float, float] | None = None) -> dict[str, Any]:
    """The summary dict: throughput, fairness, latency, cache and per-client/per-worker figures.

    ``window`` (t1, t2), the steady-state window (:mod:`sglang_fair.metrics.steady`): service rates,
    Jain's index and the backlogged difference cover only the ledger windows inside it, the hit
    rate the requests first admitted in it, latencies the programs that arrived in it, or in
    ``latency_window`` if given (an unfinished one counts as waiting until the end of the run: a lower
    bound, counted in ``latency_censored``). Without it every figure covers the whole run.
    """
    end = max(result.end_time, 1e-9)
    clients = sorted({p.client for p in result.programs})
    w = {c: result.weights.get(c, 1.0) for c in clients}
    led = result.ledger
    lo, hi, span = _bounds(led.window, window, end)
    perceived = {c: led.total(c, "perceived", lo, hi) for c in clients}
    actual = {c: led.total(c, "actual", lo, hi) for c in clients}
    t1, t2 = all_active_interval(client_activity(result))
    t1, t2 = max(t1, lo), min(t2, hi)
    if t2 - t1 < led.window:
        t1, t2 = lo, min(hi, end)
    rates = [led.total(c, "perceived", t1, t2) / w[c] for c in clients]
    rates_actual = [led.total(c, "actual", t1, t2) / w[c] for c in clients]
    lat_window = latency_window or window
    a1, a2 = lat_window or (0.0, math.inf)
    programs = [p for p in result.programs if a1 <= p.arrival < a2]
    lat = [x for p in programs if not p.misbehaving and (x := _latency(p, window, end)) is not None]
    admitted = [r for r in result.requests if r.admitted >= 0 and (window is None or lo <= r.admitted < hi)]
    total_in = sum(r.input_len for r in admitted)
    if window is None:
        series = {c: led.series(c, "actual", end) for c in clients}
        backlog = backlog_intervals(result.requests, end)  # waiting, not yet admitted
    else:
        series, backlog = _windowed_backlog(result, lo, hi, end)
    out: dict[str, Any] = {
        "throughput": round(sum(perceived.values()) / span, 3),
        "actual_service_rate": round(sum(actual.values()) / span, 3),
        "jain_index": round(jain_index(rates), 4),
        "jain_index_actual": round(jain_index(rates_actual), 4),
        "well_behaved_p50_s": _num(percentile(lat, 50)),
        "well_behaved_p99_s": _num(percentile(lat, 99)),
        "cache_hit_rate": round(sum(r.cached_len for r in admitted) / total_in, 4) if total_in else 0.0,
        "max_backlogged_service_diff": round(max_backlogged_diff(series, backlog, led.window, w), 1),
        "makespan_s": round(result.end_time, 3),
        "all_active_interval_s": [round(t1, 3), round(t2, 3)],
        "programs": len(result.programs),
        "programs_finished": sum(1 for p in result.programs if p.finished >= 0),
        "requests": len(result.requests),
        "retractions": sum(r.retractions for r in result.requests),
        "clients": _clients(programs, result, clients, perceived, actual, window),
        "workers": _workers(result),
    }
    if window is not None:
        out["metrics_window_s"] = [round(lo, 3), round(min(hi, end), 3)]
        out["latency_arrivals_s"] = [round(x, 3) for x in (lat_window or window)]
        out["latency_censored"] = sum(1 for p in programs if not p.misbehaving and _unfinished(p))
    return out


def summarize_windows(result: RunResult, metrics: steady.MetricsConfig, duration: float) -> dict[str, Any]:
    """:func:`summarize` over the windows ``metrics`` names for a run whose arrivals last ``duration`` s."""
    window = steady.metrics_window(metrics, duration, result.end_time)
    return summarize(result, window, steady.latency_window(metrics, window))


def _bounds(width: float, window: tuple[float, float] | None, end: float) -> tuple[float, float, float]:
    """(t1, t2, seconds of whole ledger windows inside [t1, t2]); the whole run without a window."""
    if window is None:
        return 0.0, math.inf, end
    lo, hi = window
    whole = math.floor(min(hi, end) / width + 1e-9) - math.ceil(lo / width - 1e-9)
    return lo, hi, max(whole, 1) * width


def _unfinished(p: ProgramRecord) -> bool:
    return (p.first_token if p.metric == "ttft" else p.finished) < 0


def _latency(p: ProgramRecord, window: tuple[float, float] | None, end: float) -> float | None:
    x = p.latency()
    return end - p.arrival if x is None and window is not None else x


def _windowed_backlog(result: RunResult, lo: float, hi: float, end: float,
                      ) -> tuple[dict[str, list[float]], dict[str, list[tuple[float, float]]]]:
    """Per-window actual service and backlog intervals of the ledger windows inside [lo, hi],
    re-based so that the first of them starts at 0."""
    led, clients = result.ledger, sorted({p.client for p in result.programs})
    k1 = math.ceil(lo / led.window - 1e-9)
    k2 = max(k1, math.floor(min(hi, end) / led.window + 1e-9))
    base = k1 * led.window
    series = {c: led.series(c, "actual", end)[k1:k2] for c in clients}
    backlog = {
        c: [(max(s, base) - base, min(e, k2 * led.window) - base)
            for s, e in spans if e > base and s < k2 * led.window]
        for c, spans in backlog_intervals(result.requests, end).items()
    }
    return series, backlog


def _clients(programs: list[ProgramRecord], result: RunResult, clients: list[str],
             perceived: Mapping[str, float], actual: Mapping[str, float],
             window: tuple[float, float] | None) -> dict[str, dict[str, Any]]:
    end = max(result.end_time, 1e-9)
    lat: dict[str, list[float]] = {c: [] for c in clients}
    for p in programs:
        if p.client in lat and (x := _latency(p, window, end)) is not None:
            lat[p.client].append(x)
    requests = Counter(r.client for r in result.requests)
    runs = Counter(p.client for p in result.programs)
    misbehaving = {p.client for p in result.programs if p.misbehaving}
    return {c: {
        "service": round(perceived[c], 1),
        "actual_service": round(actual[c], 1),
        "p50_s": _num(percentile(lat[c], 50)),
        "p99_s": _num(percentile(lat[c], 99)),
        "requests": requests[c],
        "programs": runs[c],
        "misbehaving": c in misbehaving,
    } for c in clients}


def _workers(result: RunResult) -> list[dict[str, Any]]:
    requests = Counter(r.worker for r in result.requests)
    return [{"requests": requests[wk],
             "actual_service": round(sum(result.ledger.worker_actual.get(wk, {}).values()), 1)}
            for wk in range(result.workers)]
