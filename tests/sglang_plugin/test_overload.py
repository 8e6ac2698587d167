"""Overload at the edge and in the scheduler: the per-client bound on waiting requests
(429, SGLang's abort path), the request-body limit (413) and ``Retry-After`` on every 429."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from types import SimpleNamespace
from typing import Any

import pytest
from plugin_support import FakeReq

from sglang_fair.edge.limits import EdgeLimitsMiddleware
from sglang_fair.sglang_plugin import client_bound
from sglang_fair.sglang_plugin.config import FairConfig, build_config

Sent = list[MutableMapping[str, Any]]


def test_refusal_counts_only_the_clients_own_waiting_requests() -> None:
    waiting = [FakeReq(f"a{i}", "alice", [1]) for i in range(3)] + [FakeReq("b0", "bob", [1])]
    assert client_bound.refusal(waiting, FakeReq("a9", "alice", [1]), 4) is None
    refused = client_bound.refusal(waiting, FakeReq("a9", "alice", [1]), 3)
    assert "'alice' already has 3 requests waiting" in str(refused)
    assert client_bound.refusal(waiting, FakeReq("b1", "bob", [1]), 3) is None
    assert client_bound.refusal(waiting, FakeReq("x", None, [1]), 1) is None  # no client named: no bound
    assert client_bound.refusal(waiting, FakeReq("a9", "alice", [1]), 0) is None  # 0: off
    retracted = FakeReq("a0", "alice", [1])
    retracted.is_retracted = True  # type: ignore[attr-defined]
    assert client_bound.refusal(waiting, retracted, 1) is None  # admitted already: never refused


@pytest.mark.sglang
def test_the_scheduler_hook_aborts_with_429_after_sglangs_own_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_bound, "queued_limit", lambda: 2)
    aborted: list[Any] = []
    scheduler = SimpleNamespace(waiting_queue=[FakeReq("a0", "alice", [1]), FakeReq("a1", "alice", [1])],
                                send_abort_output=lambda abort, req: aborted.append((abort, req)))
    sglang_full = lambda self, req: True  # noqa: E731
    sglang_room = lambda self, req: False  # noqa: E731
    assert client_bound.abort_on_queued_limit(sglang_full, scheduler, FakeReq("a2", "alice", [1]))
    assert aborted == []  # SGLang's own 503 took it
    assert not client_bound.abort_on_queued_limit(sglang_room, scheduler, FakeReq("b0", "bob", [1]))
    assert client_bound.abort_on_queued_limit(sglang_room, scheduler, FakeReq("a2", "alice", [1]))
    (abort, req), = aborted
    assert req.rid == abort.rid == "a2" and abort.finished_reason["status_code"] == 429
    assert "already has 2 requests waiting" in abort.finished_reason["message"]


def test_the_default_bound_and_body_limit() -> None:
    config = FairConfig()
    assert config.client_max_queued == 1024 and config.edge.max_body_bytes == 16 << 20
    assert build_config(json.loads(config.to_env())) == config
    with pytest.raises(ValueError, match="client-max-queued"):
        FairConfig(client_max_queued=-1)


def test_serve_gives_the_router_the_bound_times_the_workers() -> None:
    from sglang_fair.cli import build_parser
    from sglang_fair.sglang_plugin.router_launch import with_client_ttl
    from sglang_fair.sglang_plugin.router_link import RouterLink, RouterSettings, router_command

    config = build_config({"client_max_queued": 100})
    settings = with_client_ttl(RouterSettings(), config, num_workers=3)
    command = router_command(RouterLink("/tmp/x", 3), "d2lpm", settings, config.cost())
    args = build_parser().parse_args(command)
    assert args.router_client_max_inflight == 300


def run(mw: EdgeLimitsMiddleware, chunks: list[bytes], length: int | None = None,
        status: int = 200) -> tuple[Sent, bytes]:
    sent: Sent = []
    got = bytearray()
    last = len(chunks) - 1
    queue = [{"type": "http.request", "body": c, "more_body": i < last} for i, c in enumerate(chunks)]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        more = True
        while more:
            message = await receive()
            got.extend(message.get("body", b""))
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> MutableMapping[str, Any]:
        return queue.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    mw.app = app
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    scope = {"type": "http", "path": "/v1/completions", "method": "POST", "headers": headers}
    asyncio.run(mw(scope, receive, send))
    return sent, bytes(got)


def test_a_body_over_the_limit_gets_413_before_it_is_read() -> None:
    mw = EdgeLimitsMiddleware(None, max_body_bytes=10)  # type: ignore[arg-type]
    sent, read = run(mw, [b"x" * 11], length=11)
    assert sent[0]["status"] == 413 and read == b""
    body = json.loads(sent[1]["body"])
    assert body["object"] == "error" and body["code"] == 413 and "--max-body-bytes" in body["message"]
    sent, read = run(mw, [b"x" * 6, b"x" * 6])  # chunked, no length: refused once past the limit
    assert sent[0]["status"] == 413 and read == b""
    sent, read = run(mw, [b"x" * 5, b"x" * 5])  # chunked, within: replayed whole
    assert sent[0]["status"] == 200 and read == b"x" * 10
    sent, read = run(mw, [b"x" * 10], length=10)
    assert sent[0]["status"] == 200 and read == b"x" * 10
    sent, _ = run(EdgeLimitsMiddleware(None, 0), [b"x" * 100], length=100)  # type: ignore[arg-type]
    assert sent[0]["status"] == 200  # 0: no limit


def test_every_429_gets_retry_after() -> None:
    mw = EdgeLimitsMiddleware(None, max_body_bytes=0)  # type: ignore[arg-type]
    sent, _ = run(mw, [b"{}"], length=2, status=429)
    assert (b"retry-after", b"1") in sent[0]["headers"]
    sent, _ = run(mw, [b"{}"], length=2, status=503)
    assert sent[0]["headers"] == []
