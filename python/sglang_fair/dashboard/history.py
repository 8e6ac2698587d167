"""A bounded ring of per-client snapshots, and what the fairness page draws from it.

The servers keep per-client totals since they started (``/fairness``), not their history. The HTTP
process of ``serve`` and the gateway each sample those totals every ``interval_s`` seconds into a
:class:`History` of at most ``window_s / interval_s + 1`` samples, and the page reads from it:

- the share of the service each client received in each interval (the largest ``top`` clients by name,
  the rest summed as ``others``);
- the largest service gap between two clients both backlogged (requests waiting at both ends of every
  interval of a stretch), per unit of weight, as [1] Thm 4.1 bounds it (``max_drift`` over the sampled
  intervals: a sampled estimate of the quantity the theorem bounds);
- each client's prefix-cache hit rate over the window.

The sampler (a thread at ``serve``) appends while the page reads: each reading copies the ring once
(``list`` of a deque is atomic under the GIL). Times are ``time.monotonic()`` readings passed in; the
page shows ages (now minus a sample's time), so nothing depends on when the machine booted. Totals that
fall (a server restarted, a client expired) count as no service in that interval.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from sglang_fair.metrics.stats import max_drift

OTHERS = "others"
GAP_CLIENTS = 32  # the gap is computed over at most this many backlogged clients (the most served)


class Row(NamedTuple):
    """One client's totals in one sample (from its ``/fairness`` figures)."""

    service: float
    waiting: int
    running: int
    input_tokens: int
    cached_tokens: int

    @classmethod
    def of(cls, figures: Mapping[str, Any]) -> Row:
        def num(name: str) -> float:
            value = figures.get(name)
            return float(value) if isinstance(value, int | float) else 0.0

        return cls(num("service"), int(num("waiting")), int(num("running")), int(num("input_tokens")),
                   int(num("cached_tokens")))


@dataclass(frozen=True)
class Sample:
    t: float  # time.monotonic() when taken
    rows: dict[str, Row]


class History:
    """The last ``window_s`` seconds of samples, one every ``interval_s`` seconds (older ones drop out)."""

    def __init__(self, window_s: float = 300.0, interval_s: float = 2.0) -> None:
        if window_s <= 0 or interval_s <= 0:
            raise ValueError(f"window_s and interval_s must be > 0, got {window_s}, {interval_s}")
        self.window_s, self.interval_s = window_s, interval_s
        self.samples: deque[Sample] = deque(maxlen=int(window_s / interval_s) + 1)

    def add(self, t: float, clients: Mapping[str, Mapping[str, Any]]) -> None:
        """Record the per-client figures ``clients`` (``/fairness``'s ``clients``) as seen at ``t``."""
        self.samples.append(Sample(t, {c: Row.of(f) for c, f in clients.items()}))

    def deltas(self) -> list[dict[str, float]]:
        """Per interval (between consecutive samples): the service each client received (>= 0)."""
        return _deltas(list(self.samples))

    def shares(self, now: float, top: int = 8) -> dict[str, Any]:
        """The share of the service per interval: ``age_s`` (seconds before ``now`` each interval ended),
        ``rate`` (service per second in it), ``clients`` (the ``top`` most served, by name: their shares)
        and ``others`` (the rest, summed)."""
        samples = list(self.samples)  # one copy: the sampler may append meanwhile
        steps = _deltas(samples)
        served = _summed(steps)
        shown = sorted(sorted(served, key=lambda c: -served[c])[:top])
        series: dict[str, list[float]] = {c: [] for c in shown}
        others, rate, ages = [], [], []
        for k, step in enumerate(steps):
            total = sum(step.values())
            for c in shown:
                series[c].append(round(step.get(c, 0.0) / total, 4) if total > 0 else 0.0)
            rest = total - sum(step.get(c, 0.0) for c in shown)
            others.append(round(rest / total, 4) if total > 0 else 0.0)
            span = samples[k + 1].t - samples[k].t
            rate.append(round(total / span, 1) if span > 0 else 0.0)
            ages.append(round(now - samples[k + 1].t, 1))
        return {"age_s": ages, "rate": rate, "clients": series, OTHERS: others,
                "served": {c: round(served[c], 1) for c in shown}}

    def gap(self, weights: Mapping[str, float] | None = None) -> dict[str, Any]:
        """The largest |service_a / w_a - service_b / w_b| gained over a stretch of intervals in which
        both clients had requests waiting at both ends (0 with fewer than two such clients)."""
        weights = weights or {}
        samples = list(self.samples)
        steps = _deltas(samples)
        backlogged = [[c for c, row in s.rows.items() if row.waiting > 0] for s in samples]
        served = _summed(steps)
        ever = {c for names in backlogged for c in names}
        clients = sorted(sorted(ever, key=lambda c: -served.get(c, 0.0))[:GAP_CLIENTS])
        best, pair = 0.0, None
        for i, a in enumerate(clients):
            for b in clients[i + 1:]:
                wa, wb = weights.get(a, 1.0), weights.get(b, 1.0)
                both = [a in names and b in names for names in backlogged]
                drift = max_drift((both[k] and both[k + 1], step.get(a, 0.0) / wa - step.get(b, 0.0) / wb)
                                  for k, step in enumerate(steps))
                if drift > best:
                    best, pair = drift, [a, b]
        return {"value": round(best, 1), "clients": pair, "backlogged": len(ever)}

    def hit_rates(self) -> dict[str, float]:
        """Per client: cached / input tokens received over the window (clients with input only)."""
        samples = list(self.samples)
        if len(samples) < 2:
            return {}
        first, last = samples[0].rows, samples[-1].rows
        out = {}
        for c, row in last.items():
            before = first.get(c)
            got = row.input_tokens - (before.input_tokens if before else 0)
            cached = row.cached_tokens - (before.cached_tokens if before else 0)
            if got > 0 and cached >= 0:
                out[c] = round(cached / got, 4)
        return out

    def span(self) -> float:
        """Seconds between the first and the last sample."""
        samples = list(self.samples)
        return samples[-1].t - samples[0].t if len(samples) > 1 else 0.0


def _deltas(samples: list[Sample]) -> list[dict[str, float]]:
    return [{c: max(0.0, row.service - (before.rows[c].service if c in before.rows else 0.0))
             for c, row in after.rows.items()} for before, after in itertools.pairwise(samples)]


def _summed(steps: list[dict[str, float]]) -> dict[str, float]:
    """Per client, the service over every interval."""
    served: dict[str, float] = {}
    for step in steps:
        for c, d in step.items():
            served[c] = served.get(c, 0.0) + d
    return served
