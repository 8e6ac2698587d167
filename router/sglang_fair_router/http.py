"""Read-only HTTP view of the router: ``/state`` (JSON) and ``/metrics`` (Prometheus text)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "sglang_fair_router"


class SnapshotCollector(Collector):
    """Exposes a router snapshot (taken at scrape time) as Prometheus metric families."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        yield GaugeMetricFamily(f"{PREFIX}_tree_tokens", "tokens held by the global radix tree",
                                value=snap["tree_tokens"])
        yield GaugeMetricFamily(f"{PREFIX}_inflight", "requests dispatched and not finished",
                                value=snap["inflight"])
        events = CounterMetricFamily(f"{PREFIX}_events", "router events by kind", labels=["event"])
        for kind, count in snap["counts"].items():
            events.add_metric([kind], count)
        yield events
        yield from self._workers(snap["workers"])
        deficit = GaugeMetricFamily(f"{PREFIX}_deficit", "D2LPM counter q[client][worker]",
                                    labels=["client", "worker"])
        for client, q in snap["deficits"].items():
            for worker, value in enumerate(q):
                deficit.add_metric([client, str(worker)], value)
        yield deficit
        weight = GaugeMetricFamily(f"{PREFIX}_client_weight", "the client's weight (clients not named: 1)",
                                   labels=["client"])
        for client, value in snap.get("weights", {}).items():
            weight.add_metric([client], value)
        yield weight
        latency = snap.get("submit_to_dispatch_us")
        if latency:
            family = GaugeMetricFamily(f"{PREFIX}_dispatch_us", "submit-to-dispatch time inside the router",
                                       labels=["quantile"])
            for q in ("p50", "p99", "p999"):
                family.add_metric([q], latency[q])
            yield family

    @staticmethod
    def _workers(workers: list[dict[str, Any]]) -> Iterator[Metric]:
        figures = {"queue": ("queue", "requests dispatched to the worker and not finished"),
                   "alive": ("alive", "1 while the worker answers"),
                   "reported_inflight": ("reported_inflight", "routed requests the worker reports holding"),
                   "send_backlog": ("send_backlog", "messages waiting because the worker's socket is full"),
                   "cached_tokens": ("cached_tokens_estimate", "tokens the tree records the worker holds"),
                   "hit_estimate": ("hit_estimate", "share of dispatched input tokens the tree said it held")}
        for name, (key, doc) in figures.items():
            family = GaugeMetricFamily(f"{PREFIX}_worker_{name}", doc, labels=["worker"])
            for w in workers:
                if w.get(key) is not None:
                    family.add_metric([str(w["worker"])], float(w[key]))
            yield family


def prometheus_text(snapshot: Callable[[], dict[str, Any]]) -> bytes:
    """The Prometheus text exposition of one snapshot (prometheus_client does the format)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return bytes(generate_latest(registry))


def serve_state(port: int, snapshot: Callable[[], dict[str, Any]],
                host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Start the view on ``host``:``port`` in a daemon thread; returns the server (``.shutdown()``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/state":
                body, kind = json.dumps(snapshot()).encode(), "application/json"
            elif self.path == "/metrics":
                body, kind = prometheus_text(snapshot), CONTENT_TYPE_LATEST
            else:
                self.send_error(404, "try /state or /metrics")
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
