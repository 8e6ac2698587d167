"""A tiny in-process OpenAI-compatible server on loopback, for the benchmark client's tests.

It streams ``/v1/completions`` and ``/v1/chat/completions`` one token per chunk (each token a word
unique to the request, so a test can tell whose output a prompt contains), and logs every call.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Seen:
    client: str
    prompt: str
    received: float
    output: str = ""
    finished: float = -1.0
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeServer:
    token_s: float = 0.002
    report_cached: bool = True
    continuous_usage: bool = True
    fail_clients: frozenset[str] = frozenset()
    hang: bool = False
    fairness: bool = False
    token_ids: bool = True  # answer return_token_ids
    stall_after: int | None = None  # even-numbered calls stop streaming after this many tokens
    seen: list[Seen] = field(default_factory=list)
    url: str = ""

    def client_of(self, request: web.Request, body: dict[str, Any]) -> str:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[7:]
        return request.headers.get("X-Client-Id") or str(body.get("user", "default"))

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        client = self.client_of(request, body)
        prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
        if isinstance(prompt, list):  # token ids: logged as text of ids
            prompt = "".join(f" {i}" for i in prompt)
        rec = Seen(client, prompt, time.monotonic(), headers=dict(request.headers), body=body)
        self.seen.append(rec)
        if client in self.fail_clients:
            return web.json_response({"error": "boom"}, status=500)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if self.hang:
            await asyncio.sleep(3600)
        n, rid = int(body["max_tokens"]), len(self.seen)
        words = prompt.split()
        earlier = [len(s.prompt.split()) for s in self.seen[:-1] if prompt.startswith(s.prompt)]
        cached = max(earlier, default=0)
        for k in range(n):
            if self.stall_after is not None and k == self.stall_after and rid % 2 == 0:
                await asyncio.sleep(3600)  # every other call stalls mid-stream
            await asyncio.sleep(self.token_s)
            word = f" r{rid}t{k}"
            choice: dict[str, Any] = {"index": 0, "delta": {"content": word}} if "messages" in body else {
                "index": 0, "text": word}
            if body.get("return_token_ids") and self.token_ids:
                choice["token_ids"] = [100000 * rid + k]
                word = f" {100000 * rid + k}"
            rec.output += word
            chunk: dict[str, Any] = {"choices": [choice]}
            if self.continuous_usage:
                chunk["usage"] = {"prompt_tokens": len(words), "completion_tokens": k + 1}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage: dict[str, Any] = {"prompt_tokens": len(words), "completion_tokens": n,
                                 "prompt_tokens_details": None}
        if self.report_cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        rec.finished = time.monotonic()
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "fake-model"}]})

    async def fairness_doc(self, request: web.Request) -> web.Response:
        return web.json_response({"clients": {}})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.completions)
        app.router.add_get("/v1/models", self.models)
        if self.fairness:
            app.router.add_get("/fairness", self.fairness_doc)
        return app


class Running:
    """Serve ``server`` from a background thread (``with Running(server) as url``)."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        runner = web.AppRunner(self.server.app(), shutdown_timeout=0.5)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        port = runner.addresses[0][1]
        self.server.url = f"http://127.0.0.1:{port}"
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(runner.cleanup())

    def __enter__(self) -> str:
        self.thread.start()
        self.ready.wait(10)
        return self.server.url

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
