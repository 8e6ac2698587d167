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
        self.quantum: Callable[[], float] | None = None  # the policy's Q^u for the bound (the page's)

    def maybe_write(self, version: int, idle: bool, snapshot: Any) -> None:
        """Write ``snapshot()`` if the state changed and (idle or ``interval`` passed)."""
        now = self.clock()
        if version == self._last_version:
            return
        if not idle and self._last_time is not None and now - self._last_time < self.interval:
            return
        clients = snapshot()
        payload: dict[str, Any] = {"policy": self.policy, "clients": clients}
        if self.quantum is not None:
            payload["quantum"] = self.quantum()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, self.path)
        self._last_time, self._last_version = now, version
        if self.gauges is not None:
            self.gauges.update({c: f for c, f in clients.items() if c not in INTERNAL_CLIENTS})


def read_all(directory: Path | None) -> dict[str, Any]:
    """Merge the schedulers' snapshots: ``{"policy", "schedulers", "clients": {c: figures},
    "internal": {c: figures}, "quantum"}`` (``quantum``: the largest Q^u a scheduler published, None
    when none did).

    Token counts, service and queue figures are summed over DP ranks; ``counter`` is the sum of the
    per-rank counters (each rank runs its own policy). With several ranks, ``counters`` lists every
    client's counter per rank, in rank order, null on a rank where the client has no state (it never
    sent there, or was forgotten there). The server's own requests (SGLang's warm-up, the ``/health``
    probes: ``edge.identity``'s :data:`INTERNAL_CLIENTS`) are scheduled like a client's but are listed
    apart, under ``internal``.
    """
    snapshots: list[dict[str, Any]] = []
    for path in sorted(directory.glob("scheduler-*.json"), key=_rank) if directory else []:
        try:
            snapshots.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    merged: dict[str, dict[str, Any]] = {}
    for rank, data in enumerate(snapshots):
        for client, figures in data.get("clients", {}).items():
            _add(merged.setdefault(client, {"counters": [None] * len(snapshots)}), figures, rank)
    for figures in merged.values():  # one scheduler: its counter; several (DP): the sum, and the list
        counters = figures.pop("counters")
        known = [c for c in counters if c is not None]
        figures["counter"] = sum(known) if known else None
        if len(counters) > 1:
            figures["counters"] = counters
    internal = {c: merged.pop(c) for c in sorted(INTERNAL_CLIENTS) if c in merged}
    policy = next((d["policy"] for d in reversed(snapshots) if d.get("policy") is not None), None)
    quanta = [float(d["quantum"]) for d in snapshots if isinstance(d.get("quantum"), int | float)]
    return {"policy": policy, "schedulers": len(snapshots), "clients": merged, "internal": internal,
            "quantum": max(quanta) if quanta else None}


def _rank(path: Path) -> int:
    """The DP rank of ``scheduler-<rank>.json`` (numeric order: rank 10 after rank 9)."""
    suffix = path.stem.rsplit("-", 1)[-1]
    return int(suffix) if suffix.isdigit() else -1


def _add(into: dict[str, Any], figures: dict[str, Any], rank: int) -> None:
    for name, value in figures.items():
        if name == "counter":
            into["counters"][rank] = value
        elif name in ("weight",) or value is None:
            into.setdefault(name, value)
        else:
            into[name] = into.get(name, 0) + value
