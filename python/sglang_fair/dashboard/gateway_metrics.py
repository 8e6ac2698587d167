"""The gateway's Prometheus metrics (``GET /metrics``), read from its state at each scrape.

Per client (label ``client``): ``sglang_fair_gateway_client_in_flight`` (requests relayed and not
ended), ``sglang_fair_gateway_client_answers_total{kind}`` (``requests``, ``refused`` = 429,
``client_errors`` = other 4xx, ``server_errors`` = 5xx). Per worker (labels ``worker``, ``server``,
``rank``): ``sglang_fair_gateway_worker_queue``, ``..._worker_routed_total``, ``..._worker_finished_total``
and ``..._worker_out`` (1 while its server is taken out). Gateway-wide: ``..._failed_over_total``
(requests a server could not be reached for, sent to another) and ``..._stale_servers`` (servers whose
figures the page could not refresh), ``..._backlogged_gap`` and ``..._gap_bound`` (the page's largest
backlogged gap and the bound it is held against, when a theorem gives one). The servers' per-client
figures are the servers' own ``sglang_fair:*`` gauges: scrape the servers for them. The background
duties' restarts and whether each runs: ``..._duty_restarts_total`` and ``..._duty_running``
(``gateway/duties.py``). With ``--workers N``: ``..._processes``, ``..._process_restarts_total`` (the
same in every process) and ``..._process_index`` (which process answered); on the shared port every
process's figures merged, with ``..._processes_answered`` (``gateway/metrics_sum.py``).
Per tenant, bounded: ``sglang_fair_tenant_*`` (``metrics/tenant_series.py``): the top
``--metrics-top-tenants`` by service over the servers, the rest summed under ``__other__``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from sglang_fair.dashboard.model import merge_rows
from sglang_fair.dashboard.status import NO_CLIENT, OTHER, StatusBook
from sglang_fair.gateway.duties import DutyCollector
from sglang_fair.metrics.tenant_series import TenantCollector

if TYPE_CHECKING:
    from sglang_fair.gateway.app import Gateway


class PageView(Protocol):
    """What the metrics read of the fairness page's state (``gateway_page.GatewayPage``)."""

    gateway: Gateway
    book: StatusBook
    answers: dict[str, dict[str, Any]]
    stale: dict[str, str]

    def bound(self) -> dict[str, Any]: ...

    def gap(self) -> dict[str, Any]: ...

    def workers(self) -> list[dict[str, Any]]: ...

PREFIX = "sglang_fair_gateway_"


class GatewayCollector:
    """A prometheus_client collector over a :class:`PageView` (its gateway and answer counts)."""

    def __init__(self, page: PageView) -> None:
        self.page = page

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        gateway = self.page.gateway
        inflight = GaugeMetricFamily(PREFIX + "client_in_flight", "requests relayed and not ended",
                                     labels=["client"])
        answered = self.page.book.view()
        held = gateway.router.clients.inflight
        for client in sorted(set(held) | {c for c in answered if c not in (NO_CLIENT, OTHER)}):
            inflight.add_metric([client], held.get(client, 0))
        answers = CounterMetricFamily(PREFIX + "client_answers", "answers given, by kind",
                                      labels=["client", "kind"])
        for client, counts in sorted(answered.items()):
            for kind, n in counts.items():
                answers.add_metric([client, kind], n)
        yield from (inflight, answers)
        labels = ["worker", "server", "rank"]
        families = {name: GaugeMetricFamily(PREFIX + f"worker_{name}", what, labels=labels)
                    for name, what in (("queue", "requests relayed to the worker and not ended"),
                                       ("out", "1 while the worker's server is taken out"))}
        counters = {name: CounterMetricFamily(PREFIX + f"worker_{name}", f"requests {name} at the worker",
                                              labels=labels) for name in ("routed", "finished")}
        for row in self.page.workers():
            values = [str(row["name"]), str(row["server"]), str(row["rank"])]
            families["queue"].add_metric(values, row["queue"])
            families["out"].add_metric(values, 1 if row["state"] == "out" else 0)
            for name, family in counters.items():
                family.add_metric(values, row[name])
        yield from (*families.values(), *counters.values())
        failed_over = CounterMetricFamily(PREFIX + "failed_over", "requests sent to another server")
        failed_over.add_metric([], gateway.failed_over)
        stale = GaugeMetricFamily(PREFIX + "stale_servers", "servers whose figures could not be refreshed")
        stale.add_metric([], len([u for u in self.page.stale if u != "sampler"]))
        yield from (failed_over, stale)
        gap = GaugeMetricFamily(PREFIX + "backlogged_gap", "largest service gap (per weight) between two "
                                "clients backlogged together, over the page's window")
        gap.add_metric([], self.page.gap()["value"])
        yield gap
        if (bound := self.page.bound()["value"]) is not None:
            stated = GaugeMetricFamily(PREFIX + "gap_bound", "the policies' bound on that gap")
            stated.add_metric([], bound)
            yield stated


def tenant_rows(page: PageView) -> dict[str, dict[str, Any]]:
    """Per tenant: its figures summed over the servers, and its requests in flight through the gateway."""
    rows = merge_rows(page.answers)
    for client, n in page.gateway.router.clients.inflight.items():
        rows.setdefault(client, {})["in_flight"] = n
    return rows


def metrics_text(page: PageView) -> bytes:
    """The Prometheus text exposition of the gateway's metrics (with its background duties')."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(GatewayCollector(page))
    registry.register(DutyCollector(page.gateway.duties))
    if page.gateway.process is not None:  # one of --workers N
        registry.register(page.gateway.process)
    top = page.gateway.config.edge.metrics_top_tenants
    registry.register(TenantCollector(lambda: tenant_rows(page), top))
    return generate_latest(registry)
