"""Read-only HTTP view of the router: ``/state`` (JSON) and ``/metrics`` (Prometheus text)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def prometheus_text(snap: dict[str, Any]) -> str:
    lines = [
        "# TYPE sglang_fair_router_tree_tokens gauge",
        f"sglang_fair_router_tree_tokens {snap['tree_tokens']}",
        "# TYPE sglang_fair_router_inflight gauge",
        f"sglang_fair_router_inflight {snap['inflight']}",
        "# TYPE sglang_fair_router_events_total counter",
    ]
    lines += [f'sglang_fair_router_events_total{{event="{k}"}} {v}' for k, v in snap["counts"].items()]
    lines += ["# TYPE sglang_fair_router_worker_queue gauge", "# TYPE sglang_fair_router_worker_alive gauge",
              "# TYPE sglang_fair_router_worker_cached_tokens gauge",
              "# TYPE sglang_fair_router_worker_hit_estimate gauge"]
    for w in snap["workers"]:
        label = f'worker="{w["worker"]}"'
        lines += [f"sglang_fair_router_worker_queue{{{label}}} {w['queue']}",
                  f"sglang_fair_router_worker_alive{{{label}}} {int(w['alive'])}",
                  f"sglang_fair_router_worker_cached_tokens{{{label}}} {w['cached_tokens_estimate']}"]
        if w["hit_estimate"] is not None:
            lines.append(f"sglang_fair_router_worker_hit_estimate{{{label}}} {w['hit_estimate']:.4f}")
    lines.append("# TYPE sglang_fair_router_deficit gauge")
    for client, q in snap["deficits"].items():
        name = json.dumps(client)
        lines += [f'sglang_fair_router_deficit{{client={name},worker="{w}"}} {x}' for w, x in enumerate(q)]
    latency = snap.get("submit_to_dispatch_us")
    if latency:
        lines.append("# TYPE sglang_fair_router_dispatch_us gauge")
        quantiles = ("p50", "p99", "p999")
        lines += [f'sglang_fair_router_dispatch_us{{quantile="{q}"}} {latency[q]}' for q in quantiles]
    return "\n".join(lines) + "\n"


def serve_state(port: int, snapshot: Callable[[], dict[str, Any]],
                host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Start the view on ``host``:``port`` in a daemon thread; returns the server (``.shutdown()``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/state":
                body, kind = json.dumps(snapshot()).encode(), "application/json"
            elif self.path == "/metrics":
                body, kind = prometheus_text(snapshot()).encode(), "text/plain; version=0.0.4"
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
