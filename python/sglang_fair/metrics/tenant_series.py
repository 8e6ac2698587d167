"""Per-tenant Prometheus series with bounded cardinality: the top K tenants by service, and the rest summed.

A server shared by thousands of tenants cannot give each its own label set (every scrape and every
stored series grows with them). :func:`top_tenants` keeps the ``k`` tenants with the most service (ties
by name) under their own ``tenant`` label and sums every figure of the others under :data:`OTHER`, so a
scrape holds at most ``k + 1`` label values per figure and the sum over the labels is the total over all
tenants. Membership is decided at each scrape, so the series are gauges (a tenant that moves into the
top K takes its totals out of :data:`OTHER`): graph them with ``deriv()``/``delta()``, not ``rate()``.

Names (label ``tenant``): ``sglang_fair_tenant_service`` (cost charged), ``..._requests``,
``..._input_tokens``, ``..._output_tokens``, ``..._waiting``, ``..._running`` at ``serve``
(:class:`TenantMetricsMiddleware` appends them to SGLang's ``/metrics``) and, summed over its servers,
at the gateway, with ``..._in_flight`` (requests relayed and not ended), ``dashboard/gateway_metrics.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sglang_fair.edge.asgi import ASGIApp, Message, Receive, Scope, Send

OTHER = "__other__"
EOF = b"# EOF"
PREFIX = "sglang_fair_tenant_"
FIGURES = ("service", "requests", "input_tokens", "output_tokens", "waiting", "running", "in_flight")
Rows = Mapping[str, Mapping[str, Any]]


def top_tenants(rows: Rows, k: int, by: str = "service") -> dict[str, dict[str, float]]:
    """``rows`` (tenant -> figures) with the ``k`` largest by ``by`` kept and the rest summed under
    :data:`OTHER` (present only when some tenant is left out); only :data:`FIGURES` are kept."""
    ranked = sorted(rows, key=lambda t: (-float(rows[t].get(by) or 0.0), t))
    out: dict[str, dict[str, float]] = {}
    for position, tenant in enumerate(ranked):
        label = tenant if position < k else OTHER
        into = out.setdefault(label, {})
        for name in FIGURES:
            value = rows[tenant].get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                into[name] = into.get(name, 0.0) + float(value)
    return out


class TenantCollector:
    """A prometheus_client collector of :func:`top_tenants` over ``rows()`` (read at each scrape)."""

    def __init__(self, rows: Callable[[], Rows], k: int) -> None:
        self.rows, self.k = rows, k

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        kept = top_tenants(self.rows(), self.k)
        for name in FIGURES:
            family = GaugeMetricFamily(PREFIX + name, f"per tenant (top {self.k} by service, the rest as "
                                       f"{OTHER}): {name.replace('_', ' ')}", labels=["tenant"])
            for tenant, figures in sorted(kept.items()):
                if name in figures:
                    family.add_metric([tenant], figures[name])
            if family.samples:
                yield family


def tenant_metrics_text(rows: Callable[[], Rows], k: int, openmetrics: bool = False) -> bytes:
    """The Prometheus text exposition of :class:`TenantCollector` (``openmetrics``: the OpenMetrics one,
    which ends in ``# EOF``)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.openmetrics import exposition

    registry = CollectorRegistry(auto_describe=False)
    registry.register(TenantCollector(rows, k))
    if openmetrics:
        return bytes(exposition.generate_latest(registry))  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def with_tenant_series(body: bytes, rows: Callable[[], Rows], k: int) -> bytes:
    """SGLang's ``/metrics`` text with the tenant series added: after it in the Prometheus text format,
    before its closing ``# EOF`` in OpenMetrics (what Prometheus asks for; nothing may follow the EOF)."""
    end = body.rfind(EOF)
    if end < 0 or body[end + len(EOF):].strip():
        return body + tenant_metrics_text(rows, k)
    return body[:end] + tenant_metrics_text(rows, k, openmetrics=True)


class TenantMetricsMiddleware:
    """ASGI middleware at ``serve``: a ``GET /metrics`` answered 200 (SGLang's, with
    ``--enable-metrics``) gets the tenant series appended; asked uncompressed, so the text can grow."""

    def __init__(self, app: ASGIApp, rows: Callable[[], Rows], k: int) -> None:
        self.app, self.rows, self.k = app, rows, k

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "GET" or scope.get("path") != "/metrics":
            await self.app(scope, receive, send)
            return
        scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers", [])
                                      if k.lower() != b"accept-encoding"]}
        start: Message | None = None
        chunks: list[bytes] = []

        async def held(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    await self._answer(start, b"".join(chunks), send)

        await self.app(scope, receive, held)

    async def _answer(self, start: Message | None, body: bytes, send: Send) -> None:
        if start is None:
            return
        if start.get("status") == 200:
            body = with_tenant_series(body, self.rows, self.k)
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body, "more_body": False})
