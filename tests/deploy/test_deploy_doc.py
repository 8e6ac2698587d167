"""docs/guides/deploy.md, fleet.md and the figures' reference they link (docs/reference/metrics.md) name only
figures that exist: every ``sglang_fair:*`` gauge, every router metric and ``/state`` key and every
``/fairness`` figure they mention (alerts included) is produced by the code."""

from __future__ import annotations

import re
from typing import Any

from deploy_support import ROOT
from prometheus_client.parser import text_string_to_metric_families

from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.sglang_plugin.client_gauges import FIGURES
from sglang_fair_router.http import prometheus_text
from sglang_fair_router.state import RouterState

DOC = "\n".join((ROOT / "docs" / d).read_text() for d in ("guides/deploy.md", "guides/fleet.md",
                                                                 "reference/metrics.md"))


def router_snapshot() -> dict[str, Any]:
    state = RouterState(make_routing_policy(RouterConfig("d2lpm", num_workers=2)), heartbeat_timeout=3.0)
    latency = {"count": 1, "p50": 10.0, "p99": 20.0, "p999": 30.0, "max": 30.0}
    return {**state.snapshot(), "submit_to_dispatch_us": latency}


def router_samples() -> set[str]:
    text = prometheus_text(router_snapshot).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples} | {
        f.name for f in text_string_to_metric_families(text)}


def test_client_gauges_in_the_doc_exist() -> None:
    named = set(re.findall(r"sglang_fair:(\w+)", DOC))
    assert named, "the doc names no sglang_fair:* gauge"
    assert named <= set(FIGURES), named - set(FIGURES)
    assert set(FIGURES) <= named, f"undocumented gauges: {set(FIGURES) - named}"


def test_router_metrics_in_the_doc_exist() -> None:
    named = {m for m in re.findall(r"sglang_fair_router_\w+", DOC)}
    produced = router_samples()
    assert named <= produced, named - produced
    families = {f.name for f in text_string_to_metric_families(prometheus_text(router_snapshot).decode())}
    assert families <= named | {n.removesuffix("_total") for n in named}, f"undocumented: {families - named}"


def test_router_state_keys_in_the_doc_exist() -> None:
    snap = router_snapshot()
    worker_keys = set(snap["workers"][0])
    for key in re.findall(r"`workers\[\]\.(\w+)`", DOC):
        assert key in worker_keys, key
    table = DOC.split("## The router")[1].split("| --- |")[1].split("A scrape configuration")[0]
    top = {k for cell in re.findall(r"^\| `([^|]+)` \|", table, re.M) for k in re.findall(r"(\w+)", cell)}
    top -= {"workers", "client", "worker"} | worker_keys
    assert top <= set(snap), top - set(snap)
    counts = set(snap["counts"])
    assert counts == {e for e in counts if f"`{e}`" in DOC}, "every event kind is explained"


def test_fairness_figures_in_the_doc_exist() -> None:
    table = DOC.split("## `GET /fairness`")[1].split("| --- |")[1].split("## Prometheus")[0]
    cells = re.findall(r"^\| `([^|]+)` \|", table, re.M)
    named = {k for cell in cells for k in re.findall(r"(\w+)", cell)}
    source = (ROOT / "python" / "sglang_fair" / "sglang_plugin" / "state.py").read_text()
    snapshot_keys = set(re.findall(r'"(\w+)": ', source.split("def snapshot")[1]))
    merging = (ROOT / "python" / "sglang_fair" / "sglang_plugin" / "publish.py").read_text()
    snapshot_keys |= set(re.findall(r'figures\["(\w+)"\] = ', merging))  # added where the ranks merge
    assert named == snapshot_keys, (named ^ snapshot_keys)
