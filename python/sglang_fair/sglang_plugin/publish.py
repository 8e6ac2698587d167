"""Moving per-client figures from the scheduler processes to the HTTP process.

Each scheduler (TP rank 0 of each DP rank) writes its :meth:`FairState.snapshot` as JSON to
``$SGLANG_FAIR_STATE_DIR/scheduler-<dp>.json`` (atomically, at most every ``interval`` seconds
while busy, and whenever it goes idle); the HTTP process reads and merges them for ``/fairness`` and
the Prometheus collector. A file, not a socket: nothing in SGLang's ZMQ plumbing has to change.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sglang_fair.edge.identity import INTERNAL_CLIENTS
from sglang_fair.sglang_plugin.config import ENV_STATE_DIR


def state_dir() -> Path | None:
    raw = os.environ.get(ENV_STATE_DIR)
    return Path(raw) if raw else None


class Publisher:
    """Writes one scheduler's snapshot when it changed (throttled while busy).

    The first change is written at once, whatever ``clock`` reads: ``time.monotonic()`` counts from
    boot, so a throttle measured from a zero start would hold back every snapshot of a server started
    within ``interval`` of boot.
    """

    def __init__(self, path: Path, policy: str, interval: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path, self.policy, self.interval, self.clock = path, policy, interval, clock
        self._last_time: float | None = None  # when the last snapshot was written; None: never
        self._last_version = -1
        self.gauges: Any = None  # a client_gauges.ClientGauges when --enable-metrics

    def maybe_write(self, version: int, idle: bool, snapshot: Any) -> None:
        """Write ``snapshot()`` if the state changed and (idle or ``interval`` passed)."""
        now = self.clock()
        if version == self._last_version:
            return
        if not idle and self._last_time is not None and now - self._last_time < self.interval:
            return
        clients = snapshot()
        payload = {"policy": self.policy, "clients": clients}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, self.path)
        self._last_time, self._last_version = now, version
        if self.gauges is not None:
            self.gauges.update({c: f for c, f in clients.items() if c not in INTERNAL_CLIENTS})


def read_all(directory: Path | None) -> dict[str, Any]:
    """Merge the schedulers' snapshots: ``{"policy", "schedulers", "clients": {c: figures},
    "internal": {c: figures}}``.

    Token counts, service and queue figures are summed over DP ranks; ``counter`` is the sum of the
    per-rank counters (each rank runs its own policy), listed per rank in ``counters`` when several.
    The server's own requests (SGLang's warm-up, the ``/health`` probes: ``edge.identity``'s
    :data:`INTERNAL_CLIENTS`) are scheduled like a client's but are listed apart, under ``internal``.
    """
    merged: dict[str, dict[str, Any]] = {}
    policy = None
    count = 0
    files = sorted(directory.glob("scheduler-*.json")) if directory else []
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        count += 1
        policy = data.get("policy", policy)
        for client, figures in data.get("clients", {}).items():
            _add(merged.setdefault(client, {}), figures)
    for figures in merged.values():  # one scheduler: its counter; several (DP): the sum, and the list
        counters = figures.pop("counters", [])
        figures["counter"] = sum(counters) if counters else None
        if len(counters) > 1:
            figures["counters"] = counters
    internal = {c: merged.pop(c) for c in sorted(INTERNAL_CLIENTS) if c in merged}
    return {"policy": policy, "schedulers": count, "clients": merged, "internal": internal}


def _add(into: dict[str, Any], figures: dict[str, Any]) -> None:
    for name, value in figures.items():
        if name in ("weight",) or value is None:
            into.setdefault(name, value)
        elif name == "counter":
            into.setdefault("counters", []).append(value)
        else:
            into[name] = into.get(name, 0) + value
