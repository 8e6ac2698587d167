"""Per-client Prometheus gauges, exported by each scheduler when SGLang runs with ``--enable-metrics``.

SGLang serves ``/metrics`` from prometheus_client's multiprocess directory, so gauges set in the
scheduler process appear there without any change to the HTTP side. Names (label ``client``):
``sglang_fair:counter`` (deficit or virtual counter), ``sglang_fair:service`` (cost charged),
``sglang_fair:perceived_service`` (cost as if nothing were cached), ``sglang_fair:waiting``,
``sglang_fair:running``, ``sglang_fair:input_tokens``, ``sglang_fair:cached_tokens``,
``sglang_fair:output_tokens``.

Label sets are bounded: prometheus_client cannot remove a label set in multiprocess mode (its value
stays in the process's file), so at most ``max_clients`` clients get their own ``client`` label, in
the order they appear; the figures of the others are summed under ``client="__other__"``. A labelled
client that leaves the state (expired, ``state.py``) shows zeros from then on.
"""

from __future__ import annotations

from typing import Any

OTHER = "__other__"
MAX_CLIENTS = 256

FIGURES = (
    "counter", "service", "perceived_service", "waiting", "running",
    "input_tokens", "cached_tokens", "output_tokens",
)


class ClientGauges:
    """One gauge per figure, labelled by client and DP rank."""

    def __init__(self, dp_rank: int, max_clients: int = MAX_CLIENTS) -> None:
        from prometheus_client import Gauge

        self.dp_rank, self.max_clients = str(dp_rank), max_clients
        self.labelled: set[str] = set()
        self.shown: set[str] = set()  # labels of the last snapshot
        self.gauges = {
            name: Gauge(
                f"sglang_fair:{name}", f"sglang-fair per-client {name.replace('_', ' ')}",
                labelnames=("client", "dp_rank"), multiprocess_mode="mostrecent",
            )
            for name in FIGURES
        }

    def update(self, snapshot: dict[str, dict[str, Any]]) -> None:
        rows: dict[str, dict[str, float]] = {}
        for client, figures in snapshot.items():
            if client not in self.labelled and len(self.labelled) < self.max_clients:
                self.labelled.add(client)
            label = client if client in self.labelled else OTHER
            row = rows.setdefault(label, {})
            for name in self.gauges:
                value = figures.get(name)
                if value is not None:
                    row[name] = row.get(name, 0.0) + float(value)
        present = set(rows)
        for label in self.shown - present:
            rows[label] = dict.fromkeys(self.gauges, 0.0)
        self.shown = present
        for label, row in rows.items():
            for name, value in row.items():
                self.gauges[name].labels(client=label, dp_rank=self.dp_rank).set(value)
