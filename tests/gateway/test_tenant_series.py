"""Per-tenant Prometheus series with bounded cardinality (``metrics/tenant_series.py``): with K + 5
tenants at most K + 1 label values appear per figure (the top K by service and ``__other__``), and the
labels' sums are the totals over every tenant; at ``serve`` (appended to SGLang's ``/metrics``) and at the
gateway (summed over its servers, with its requests in flight). Negative control: the per-client series
labelled by every client (the schedulers' ``sglang_fair:*``, what an unbounded label gives) have K + 5."""

from __future__ import annotations

import asyncio
import random
from collections.abc import MutableMapping
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sglang_fair.dashboard.gateway_metrics import tenant_rows
from sglang_fair.metrics.tenant_series import OTHER, TenantMetricsMiddleware, tenant_metrics_text, top_tenants

K = 4


def rows_of(n: int, seed: int) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    return {f"t{i}": {"service": rng.choice([0.0, rng.uniform(1, 1e4)]), "requests": rng.randint(0, 50),
                      "input_tokens": rng.randint(0, 9000), "output_tokens": rng.randint(0, 900),
                      "waiting": rng.randint(0, 5), "running": rng.randint(0, 3)} for i in range(n)}


def labels(text: str, name: str, label: str) -> dict[str, float]:
    return {s.labels[label]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def unbounded_text(rows: dict[str, dict[str, float]]) -> str:
    """The schedulers' per-client gauges as SGLang's ``/metrics`` shows them (one label per client)."""
    return "".join(f'sglang_fair:service{{client="{c}",dp_rank="0"}} {f["service"]}\n'
                   for c, f in rows.items())


@pytest.mark.parametrize("seed", range(5))
def test_k_plus_five_tenants_give_at_most_k_plus_one_labels_and_the_sums_match(seed: int) -> None:
    rows = rows_of(K + 5, seed)
    kept = top_tenants(rows, K)
    assert len(kept) == K + 1 and OTHER in kept
    for name in ("service", "requests", "input_tokens", "output_tokens", "waiting", "running"):
        assert sum(f[name] for f in kept.values()) == pytest.approx(sum(f[name] for f in rows.values()))
    by_service = sorted(rows, key=lambda t: (-rows[t]["service"], t))
    assert set(kept) - {OTHER} == set(by_service[:K])  # the top K by service have their own label
    assert len(labels(unbounded_text(rows), "sglang_fair:service", "client")) == K + 5  # negative control
    assert top_tenants(rows_of(K, seed), K).keys() == rows_of(K, seed).keys()  # no __other__ when all fit


def call_metrics(app: Any, accept: bytes = b"gzip") -> tuple[int, dict[bytes, bytes], bytes]:
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/metrics", "headers": [(b"accept-encoding", accept)]}
    asyncio.run(app(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return int(sent[0]["status"]), dict(sent[0]["headers"]), body


def test_serve_appends_the_bounded_series_to_sglangs_metrics() -> None:
    rows = rows_of(K + 5, 7)
    asked: list[Any] = []

    async def sglang_metrics(scope: Any, receive: Any, send: Any) -> None:
        asked.append(dict(scope["headers"]).get(b"accept-encoding"))
        text = unbounded_text(rows).encode()
        length = str(len(text)).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", length)]})
        await send({"type": "http.response.body", "body": text, "more_body": False})

    status, headers, body = call_metrics(TenantMetricsMiddleware(sglang_metrics, lambda: rows, K))
    text = body.decode()
    assert status == 200 and asked == [None]  # asked uncompressed, so the text can grow
    assert int(headers[b"content-length"]) == len(body)
    service = labels(text, "sglang_fair_tenant_service", "tenant")
    assert len(service) == K + 1
    assert sum(service.values()) == pytest.approx(sum(f["service"] for f in rows.values()))
    assert len(labels(text, "sglang_fair:service", "client")) == K + 5  # SGLang's own text is kept whole


def test_the_gateway_bounds_the_tenants_summed_over_its_servers() -> None:
    one, two = rows_of(K + 5, 1), rows_of(K + 5, 2)
    page = SimpleNamespace(
        answers={"http://a": {"clients": [{"client": c, **f} for c, f in one.items()]},
                 "http://b": {"clients": [{"client": c, **f} for c, f in two.items()]}},
        gateway=SimpleNamespace(router=SimpleNamespace(clients=SimpleNamespace(inflight={"t1": 2, "t8": 1}))))
    text = tenant_metrics_text(lambda: tenant_rows(page), K).decode()  # type: ignore[arg-type]
    service = labels(text, "sglang_fair_tenant_service", "tenant")
    total = sum(f["service"] for f in one.values()) + sum(f["service"] for f in two.values())
    assert len(service) == K + 1 and sum(service.values()) == pytest.approx(total)
    assert sum(labels(text, "sglang_fair_tenant_in_flight", "tenant").values()) == 3
    assert len(tenant_rows(page)) == K + 5  # negative control: one row (label) per tenant unbounded


def test_an_openmetrics_scrape_gets_the_series_before_its_eof() -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

    from sglang_fair.metrics.tenant_series import with_tenant_series

    rows = rows_of(K + 5, 3)
    sglang = b'# TYPE sglang_fair:service gauge\nsglang_fair:service{client="t0"} 1.0\n# EOF\n'
    body = with_tenant_series(sglang, lambda: rows, K).decode()
    assert body.count("# EOF") == 1 and body.endswith("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(body)}  # Prometheus's OpenMetrics parser accepts it
    assert len(families["sglang_fair_tenant_service"].samples) == K + 1
    assert "sglang_fair:service" in families
    with pytest.raises(ValueError):  # negative control: the series appended after the EOF, as before
        list(parse_openmetrics((sglang + tenant_metrics_text(lambda: rows, K)).decode()))
