"""The gateway's HTTP endpoint: FastAPI on uvicorn, as SGLang's own server, over a :class:`Gateway`.

:func:`make_app` mounts the relayed paths, ``/v1/models``, ``/gateway/state``, ``/health``, the fairness
page and ``/metrics`` (``dashboard/gateway_page.py``), and with ``--ext-proc-port`` starts the endpoint
picker (``epp_front.py``); its lifespan opens the servers' connection pool and runs the duties.
:class:`FrontDoor` sends a relayed ``POST`` past FastAPI.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sglang_fair.dashboard.gateway_page import mount as mount_page
from sglang_fair.dashboard.status import StatusBook, StatusMiddleware
from sglang_fair.edge.asgi import Receive, Scope, Send
from sglang_fair.edge.limits import EdgeLimitsMiddleware
from sglang_fair.gateway.app import RELAYED, Gateway, logger
from sglang_fair.gateway.intake import error
from sglang_fair.gateway.upstream import Upstream, UpstreamError, make_pool


class FrontDoor:
    """The gateway's ASGI app: a relayed ``POST`` goes through the edge's limits and the answers'
    count per client (``book``, as the FastAPI app's middleware counts) straight to
    :meth:`Gateway.relay` (no FastAPI routing, dependency solving or exception middleware on the hot
    path); every other request, and the lifespan, to the FastAPI ``app``."""

    def __init__(self, gateway: Gateway, app: FastAPI, book: StatusBook) -> None:
        self.gateway, self.app = gateway, app
        self.state = app.state  # the FastAPI app's (the fairness page's state hangs there)
        self.relay = EdgeLimitsMiddleware(StatusMiddleware(self._relay, book=book),
                                          gateway.config.edge.max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in RELAYED and scope["method"] == "POST":
            await self.relay(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _relay(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self.gateway.relay(Request(scope, receive), scope["path"])
        except Exception as err:  # what Starlette's error middleware does, as the edge's error body
            logger.exception("gateway: relaying %s failed", scope["path"])
            response = error(500, "InternalServerError", f"the gateway failed: {type(err).__name__}")
        await response(scope, receive, send)


def make_app(gateway: Gateway) -> FrontDoor:
    """The gateway's app; its lifespan opens the servers' HTTP session and runs the duties."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        config = gateway.config
        async with make_pool(config.request_timeout, config.connect_timeout) as pool:
            edge = config.edge
            upstream = gateway.upstream = Upstream(pool, edge.client_header, edge.gateway_token)
            gateway.tokenizer.post = upstream.post_json
            if (local := gateway.tokenizer.local) is not None:
                await local.verify(gateway.tokenizer.tokenize)
                logger.warning("gateway: local tokenizer %s", local.verdict)
            gateway.start_duties(upstream)
            gateway.duties.start("fairness_page", page.run)
            if gateway.process is not None and gateway.replication is not None:  # before it accepts
                await gateway.replication.joined(gateway.process.count - 1, 4 * config.peer.timeout)
            if config.ext_proc.port:  # gRPC is imported only for the picker
                from sglang_fair.gateway.epp_front import start_picker
                gateway.picker = await start_picker(gateway)
            try:
                yield
            finally:
                if gateway.picker is not None:
                    await gateway.picker.stop()
                await gateway.duties.stop()
                gateway.upstream = gateway.tokenizer.post = None
                if gateway.replication is not None:
                    gateway.replication.link.close()

    app = FastAPI(title="sglang-fair gateway", lifespan=lifespan, docs_url=None, redoc_url=None)
    page = mount_page(app, gateway)  # /fairness, its page, /metrics; counts answers per client
    app.add_middleware(EdgeLimitsMiddleware, max_body_bytes=gateway.config.edge.max_body_bytes)

    def relay(path: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await gateway.relay(request, path)
        return endpoint

    for path in RELAYED:  # reached by FrontDoor only for methods other than POST: 405, as FastAPI answers
        app.add_api_route(path, relay(path), methods=["POST"])

    async def models() -> Any:
        try:
            return await gateway._servers().get_json(gateway.table.servers[0].url, "/v1/models")
        except UpstreamError as err:
            return error(502, "BadGateway", str(err))

    async def state() -> Any:
        return gateway.state()

    async def health() -> Any:
        return {"status": "ok"}

    app.add_api_route("/v1/models", models, methods=["GET"])
    app.add_api_route("/gateway/state", state, methods=["GET"])
    app.add_api_route("/health", health, methods=["GET"])
    return FrontDoor(gateway, app, page.book)
