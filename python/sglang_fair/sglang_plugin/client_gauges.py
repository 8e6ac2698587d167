"""Per-client Prometheus gauges, exported by each scheduler when SGLang runs with ``--enable-metrics``.

SGLang serves ``/metrics`` from prometheus_client's multiprocess directory, so gauges set in the
scheduler process appear there without any change to the HTTP side. Names (label ``client``):
``sglang_fair:counter`` (deficit or virtual counter), ``sglang_fair:service`` (cost charged),
``sglang_fair:perceived_service`` (cost as if nothing were cached), ``sglang_fair:waiting``,
``sglang_fair:running``, ``sglang_fair:input_tokens``, ``sglang_fair:cached_tokens``,
``sglang_fair:output_tokens``.
"""

from __future__ import annotations

from typing import Any

FIGURES = (
    "counter", "service", "perceived_service", "waiting", "running",
    "input_tokens", "cached_tokens", "output_tokens",
)


class ClientGauges:
    """One gauge per figure, labelled by client and DP rank."""

    def __init__(self, dp_rank: int) -> None:
        from prometheus_client import Gauge

        self.dp_rank = str(dp_rank)
        self.gauges = {
            name: Gauge(
                f"sglang_fair:{name}", f"sglang-fair per-client {name.replace('_', ' ')}",
                labelnames=("client", "dp_rank"), multiprocess_mode="mostrecent",
            )
            for name in FIGURES
        }

    def update(self, snapshot: dict[str, dict[str, Any]]) -> None:
        for client, figures in snapshot.items():
            for name, gauge in self.gauges.items():
                value = figures.get(name)
                if value is not None:
                    gauge.labels(client=client, dp_rank=self.dp_rank).set(float(value))
