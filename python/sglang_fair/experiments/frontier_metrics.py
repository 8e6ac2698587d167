"""What the frontier judges a pair by, per run: the protocol's figures and the per-window ones.

- ``throughput``, ``jain_index``, ``well_behaved_p99_s``, ``cache_hit_rate``: the protocol's, over its
  steady-state window (:mod:`sglang_fair.experiments.protocol`);
- ``light_p99_s``: a closed loop's light clients' request latency (``flood``'s l1 and l2), over the
  requests sent in the steady-state window (unfinished ones count until the end);
- ``window_floor``: over the 20-s windows of the steady state, the least share of a client backlogged
  through the window, per unit of weight, against the mean of the clients backlogged through it
  (service as the workers charge it: extend + output tokens); 1 is perfectly fair, the goal is at least
  0.5 (no backlogged client below half its weighted fair share); None where no window has two
  backlogged clients;
- ``weight_ratios``: c0's service over c1's per window, where the cell gives them weights (``weighted``).
"""

from __future__ import annotations

import math
import time
from typing import Any

from sglang_fair.experiments.protocol import LOADS, Point, Protocol, simulate
from sglang_fair.experiments.scenarios import CLOSED_LOOP
from sglang_fair.metrics import summarize_windows
from sglang_fair.metrics.stats import backlog_intervals, percentile

WINDOW_S = 20.0
BACKLOGGED = 0.95  # share of a window a client must be backlogged to count as backlogged through it
KEYS = ("throughput", "jain_index", "well_behaved_p99_s", "cache_hit_rate", "max_backlogged_service_diff")


def frontier_row(point: Point, capacity: float, proto: Protocol, seed: int = 0) -> dict[str, Any]:
    """Simulate ``point`` for one seed at its load and measure it."""
    t0 = time.process_time()
    closed = CLOSED_LOOP.get(point.workload)
    rate = 1.0 if closed else LOADS[point.load] * capacity
    res = simulate(point, rate, proto.duration, seed=seed)
    summary = summarize_windows(res, proto.metrics(), proto.duration)
    row: dict[str, Any] = {k: summary.get(k) for k in KEYS}
    row["rate"] = round(rate, 5)
    windows = steady_windows(proto)
    row["window_floor"] = window_floor(res, windows)
    if closed is not None and closed.light:
        row["light_p99_s"] = light_p99(res, closed.light, proto)
    if res.weights.get("c0", 1.0) != res.weights.get("c1", 1.0):
        row["weight_ratios"] = weight_ratios(res, windows)
    row["cpu_s"] = round(time.process_time() - t0, 2)
    return row


def steady_windows(proto: Protocol) -> list[tuple[float, float]]:
    count = math.floor((proto.duration - proto.warmup) / WINDOW_S + 1e-9)
    return [(proto.warmup + k * WINDOW_S, proto.warmup + (k + 1) * WINDOW_S) for k in range(count)]


def covered(spans: list[tuple[float, float]], a: float, b: float) -> float:
    """Seconds of [a, b] inside ``spans``."""
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e in spans)


def window_floor(res: Any, windows: list[tuple[float, float]]) -> float | None:
    """The least per-weight share of a client backlogged through a window against the mean of those
    backlogged through it (None if no window has two)."""
    backlog = backlog_intervals(res.requests, res.end_time)
    weight = {c: res.weights.get(c, 1.0) for c in backlog}
    worst: float | None = None
    for a, b in windows:
        through = [c for c, spans in backlog.items() if covered(spans, a, b) >= BACKLOGGED * (b - a)]
        if len(through) < 2:
            continue
        per_weight = {c: res.ledger.total(c, "actual", a, b) / weight[c] for c in through}
        fair = sum(per_weight.values()) / len(per_weight)
        if fair > 0:
            low = min(per_weight.values()) / fair
            worst = low if worst is None else min(worst, low)
    return None if worst is None else round(worst, 4)


def weight_ratios(res: Any, windows: list[tuple[float, float]]) -> list[float | None]:
    """c0's actual service over c1's, per window (None where c1 got none)."""
    out: list[float | None] = []
    for a, b in windows:
        c0, c1 = (res.ledger.total(c, "actual", a, b) for c in ("c0", "c1"))
        out.append(round(c0 / c1, 3) if c1 else None)
    return out


def light_p99(res: Any, light: tuple[str, ...], proto: Protocol) -> float | None:
    """P99 latency of the light clients' requests sent in the latency window (unfinished: until the end)."""
    a, b = proto.warmup, proto.duration - proto.cooldown
    lat = [(r.finished if r.finished >= 0 else res.end_time) - r.arrival
           for r in res.requests if r.client in light and a <= r.arrival < b]
    return round(percentile(lat, 99), 4) if lat else None
