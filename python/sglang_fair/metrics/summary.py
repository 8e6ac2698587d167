"""One run's headline numbers: the JSON object of ``sglang-fair sim --json`` (keys fixed by issue 3)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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


def summarize(result: RunResult) -> dict[str, Any]:
    """The summary dict: throughput, fairness, latency, cache and per-client/per-worker figures."""
    end = max(result.end_time, 1e-9)
    clients = sorted({p.client for p in result.programs})
    w = {c: result.weights.get(c, 1.0) for c in clients}
    led = result.ledger
    perceived = {c: led.total(c, "perceived") for c in clients}
    actual = {c: led.total(c, "actual") for c in clients}
    t1, t2 = all_active_interval(client_activity(result))
    if t2 - t1 < led.window:
        t1, t2 = 0.0, end
    rates = [led.total(c, "perceived", t1, t2) / w[c] for c in clients]
    rates_actual = [led.total(c, "actual", t1, t2) / w[c] for c in clients]
    well = [p for p in result.programs if not p.misbehaving]
    lat = [x for p in well if (x := p.latency()) is not None]
    admitted = [r for r in result.requests if r.admitted >= 0]
    total_in = sum(r.input_len for r in admitted)
    series = {c: led.series(c, "actual", end) for c in clients}
    backlog = backlog_intervals(result.requests, end)  # waiting, not yet admitted
    out: dict[str, Any] = {
        "throughput": round(sum(perceived.values()) / end, 3),
        "actual_service_rate": round(sum(actual.values()) / end, 3),
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
        "clients": {c: _client(result, c, perceived[c], actual[c]) for c in clients},
        "workers": _workers(result),
    }
    return out


def _client(result: RunResult, client: str, perceived: float, actual: float) -> dict[str, Any]:
    lat = [x for p in result.programs if p.client == client and (x := p.latency()) is not None]
    return {
        "service": round(perceived, 1),
        "actual_service": round(actual, 1),
        "p50_s": _num(percentile(lat, 50)),
        "p99_s": _num(percentile(lat, 99)),
        "requests": sum(1 for r in result.requests if r.client == client),
        "programs": sum(1 for p in result.programs if p.client == client),
        "misbehaving": any(p.misbehaving for p in result.programs if p.client == client),
    }


def _workers(result: RunResult) -> list[dict[str, Any]]:
    out = []
    for wk in range(result.workers):
        reqs = [r for r in result.requests if r.worker == wk]
        out.append({
            "requests": len(reqs),
            "actual_service": round(sum(result.ledger.worker_actual.get(wk, {}).values()), 1),
        })
    return out
