"""A tiny stand-in for ``sglang-fair serve`` (no SGLang): ``/server_info``, ``/tokenize``, chat,
completions and ``/generate``, streaming or not; it logs every call's headers and body.

Its tokenizer: a prompt is its characters' code points; chat ``messages`` are ``[1]``, then each
message's content's code points followed by ``2``. A stream can be held after its first chunk until
the test releases it (``hold``), to show that chunks are relayed as they come.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def fake_tokens(body: dict[str, Any]) -> list[int]:
    if "messages" in body:
        out = [1]
        for m in body["messages"]:
            out += [ord(c) for c in str(m.get("content", ""))] + [2]
        return out
    return [ord(c) for c in body["prompt"]]


@dataclass
class Call:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeSGLang:
    model: str = "tiny"
    dp_size: int = 1
    calls: list[Call] = field(default_factory=list)
    hold: threading.Event | None = None  # set by the test to let a held stream go on
    refuse: int = 0  # answer every relayed request with this status (and Retry-After: 1)
    healthy: bool = True  # GET /health answers 200, else 503
    break_off: bool = False  # close the connection of every relayed request without answering
    feedback: dict[str, Any] | None = None  # the answer of GET /sglang_fair/feedback (None: 404)
    hold_whole: threading.Event | None = None  # set by the test to let held whole answers go
    page: dict[str, Any] | None = None  # the answer of GET /fairness/ui/data (None: 503)
    page_headers: dict[str, str] = field(default_factory=dict)  # of the last such call (not in calls)

    def relayed(self) -> list[Call]:
        return [c for c in self.calls if c.path not in ("/server_info", "/tokenize", "/health")]

    async def _record(self, request: web.Request) -> dict[str, Any]:
        body = await request.json() if request.method == "POST" else {}
        self.calls.append(Call(request.path, {k.lower(): v for k, v in request.headers.items()}, body))
        return body

    async def server_info(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"served_model_name": self.model, "model_path": "/m/" + self.model,
                                  "dp_size": self.dp_size})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.healthy else 503)

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if body.get("stream"):
            return web.json_response({"object": "error", "code": 501}, status=501)
        ids = fake_tokens(body)
        return web.json_response({"tokens": ids, "count": len(ids)})

    async def generate(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if self.break_off and request.transport is not None:
            request.transport.close()
            return web.Response()
        if self.refuse:
            return web.json_response({"object": "error", "code": self.refuse}, status=self.refuse,
                                     headers={"Retry-After": "1"})
        n = int(body.get("max_tokens") or body.get("sampling_params", {}).get("max_new_tokens") or 3)
        if request.path == "/generate":
            events = [{"text": "x" * (i + 1), "meta_info": {"completion_tokens": i + 1}} for i in range(n)]
            whole: dict[str, Any] = events[-1]
        else:
            key = "delta" if request.path.endswith("chat/completions") else "text"
            events = [{"choices": [{"index": 0, key: {"content": "w"} if key == "delta" else "w"}]}
                      for _ in range(n)]
            whole = {"choices": [{"index": 0, "message": {"content": "w" * n}}],
                     "usage": {"completion_tokens": n}}
        if not body.get("stream"):
            if self.hold_whole is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.hold_whole.wait, 10)
            return web.json_response(whole)
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for i, event in enumerate(events):
            await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            if i == 0 and self.hold is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.hold.wait, 10)
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def advert(self, request: web.Request) -> web.Response:
        if self.feedback is None:
            raise web.HTTPNotFound()
        return web.json_response(self.feedback)

    async def page_data(self, request: web.Request) -> web.Response:
        self.page_headers = {k.lower(): v for k, v in request.headers.items()}
        if self.page is None:
            return web.json_response({"object": "error", "code": 503}, status=503)
        return web.json_response(self.page)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/fairness/ui/data", self.page_data)
        app.router.add_get("/server_info", self.server_info)
        app.router.add_get("/sglang_fair/feedback", self.advert)
        app.router.add_get("/health", self.health)
        app.router.add_post("/tokenize", self.tokenize)
        for path in ("/v1/chat/completions", "/v1/completions", "/generate"):
            app.router.add_post(path, self.generate)
        return app


class Running:
    """Serve fakes from a background thread's event loop (``with Running(a, b) as urls``)."""

    def __init__(self, *servers: FakeSGLang) -> None:
        self.servers = servers
        self.loop = asyncio.new_event_loop()
        self.urls: list[str] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        runners = [web.AppRunner(s.app()) for s in self.servers]
        for runner in runners:
            self.loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            self.loop.run_until_complete(site.start())
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.urls.append(f"http://127.0.0.1:{port}")
        self.ready.set()
        self.loop.run_forever()
        for runner in runners:
            self.loop.run_until_complete(runner.cleanup())

    def __enter__(self) -> list[str]:
        self.thread.start()
        self.ready.wait(10)
        return self.urls

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
