"""The harness's one load model against a stand-in HTTP server: ``run_load`` (closed loop, censored at the
window's end, per client in the order sent, round robin over several URLs) and ``Traffic`` (keys, streams,
the wait after a 429) send, time and record through the same code."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from sglang_fair.harness.closed_loop import ClientSpec, generate, run_load
from sglang_fair.harness.proc import free_port
from sglang_fair.harness.traffic import Spec, Traffic


class Stand(BaseHTTPRequestHandler):
    """``/generate``: answers after ``sleep`` seconds (from the prompt ``sleep:S``), or ``status:N``;
    ``/v1/chat/completions``: a two-chunk stream. Every request's headers and body are kept."""

    seen: ClassVar[list[tuple[int, str, dict[str, str], dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        port = self.server.server_address[1]
        self.seen.append((port, self.path, dict(self.headers), body))
        text = body.get("text") or body["messages"][0]["content"]
        kind, _, value = text.partition(":")
        if kind == "status":
            self.answer(int(value), b"{}")
            return
        if kind == "sleep":
            time.sleep(float(value.split()[0]))
        if self.path == "/generate":
            meta = {"prompt_tokens": 10, "cached_tokens": 4, "completion_tokens": 3, "dp_rank": 1}
            self.answer(200, json.dumps({"meta_info": meta}).encode())
            return
        usage = {"prompt_tokens": 7, "completion_tokens": 2}
        self.answer(200, b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in (
            {"choices": []}, {"choices": [], "usage": usage})) + b"data: [DONE]\n\n")

    def answer(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def urls() -> Iterator[list[str]]:
    Stand.seen = []
    servers = [ThreadingHTTPServer(("127.0.0.1", free_port()), Stand) for _ in range(2)]
    for s in servers:
        s.daemon_threads = True
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    for s in servers:
        s.shutdown()
        s.server_close()


def test_run_load_censors_what_is_in_flight_at_the_end(urls: list[str]) -> None:
    """A fast client finishes many requests, numbered 0, 1, 2, ... across its threads in the order sent;
    a client slower than the window has one request, unanswered, censored at window end - send time;
    a refused one is answered with its status; every request is identified by its client's header."""
    specs = [ClientSpec("fast", 2, lambda i: f"sleep:0.05 {i}"), ClientSpec("slow", 1, lambda i: "sleep:5"),
             ClientSpec("bad", 1, lambda i: "status:503", headers=(("X-Client-Id", "other"),))]
    results, end = run_load(urls[0], specs, 1.0)
    fast, slow, bad = results["fast"], results["slow"], results["bad"]
    assert len(fast.done()) >= 5 and all(o.dp_rank == 1 and o.cached_tokens == 4 for o in fast.done())
    assert [o.sent for o in fast.outcomes] == sorted(o.sent for o in fast.outcomes)
    prompts = [b["text"] for _, _, h, b in Stand.seen if h["X-Client-Id"] == "fast"]
    assert sorted(int(p.split()[1]) for p in prompts) == list(range(len(prompts)))
    (only,) = slow.outcomes
    assert only.latency is None and only.status == 0 and slow.latencies(end) == [end - only.sent]
    assert len(bad.outcomes) > 5 and all(o.status == 503 and o.latency is not None for o in bad.outcomes[:-1])
    assert not bad.done() and {h["X-Client-Id"] for _, _, h, b in Stand.seen} == {"fast", "slow", "other"}


def test_run_load_takes_several_urls_in_turn(urls: list[str]) -> None:
    results, _ = run_load(urls, [ClientSpec("a", 1, lambda i: "sleep:0.02")], 0.6)
    ports = [port for port, *_ in Stand.seen]
    assert len(results["a"].done()) >= 4 and len(set(ports)) == 2
    assert all(p != q for p, q in itertools.pairwise(ports))


def test_generate_reports_a_transport_error_as_no_answer() -> None:
    out = generate(f"http://127.0.0.1:{free_port()}", {}, "x", 4, timeout=5)
    assert out.status == 0 and out.latency is None


def test_traffic_sends_keys_streams_and_waits_after_a_429(urls: list[str]) -> None:
    """Keyed clients: a stream read to [DONE] with its usage, a /generate, and one answered 429 that
    waits its second before sending again (the control, ``wait_429=0``, does not)."""
    specs = [Spec("chat", "k-chat", True), Spec("batch", "k-batch", False, words=5),
             Spec("limited", "k-lim", False, text=lambda i: "status:429"),
             Spec("eager", "k-eager", False, text=lambda i: "status:429", wait_429=0.0)]
    traffic = Traffic(urls[0], specs, deadline=10).start()
    time.sleep(1.5)
    traffic.stop()
    records = traffic.snapshot()
    by = {c: [r for r in records if r.client == c] for c in ("chat", "batch", "limited", "eager")}
    assert by["chat"][0].outcome == "ok" and by["chat"][0].completion_tokens == 2
    assert by["batch"][0].outcome == "ok" and by["batch"][0].prompt_tokens == 10
    assert 1 <= len(by["limited"]) <= 2 and by["limited"][0].outcome == "429"
    assert len(by["eager"]) > 5
    keys = {h["Authorization"] for _, _, h, _ in Stand.seen}
    assert keys == {"Bearer k-chat", "Bearer k-batch", "Bearer k-lim", "Bearer k-eager"}
    assert {p for _, p, *_ in Stand.seen} == {"/generate", "/v1/chat/completions"}
    assert traffic.sent() == records  # nothing in flight after stop
