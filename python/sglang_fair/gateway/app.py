"""The gateway's HTTP endpoint (FastAPI on uvicorn, as SGLang's own server): the clients' boundary.

``POST /v1/chat/completions``, ``/v1/completions`` and ``/generate``: the client is decided by the
same rules as ``serve`` (``sglang_plugin/identity.py``: key, else header, else ``user``; 401 for a
missing or unknown key when keys are configured), the prompt's token ids are found
(``prompt.py``), the policy picks a worker, and the body goes to that worker's server with
``routed_dp_rank`` pinned (any pin the client sent is dropped), the client named in the identity
header and the gateway's token. Streams are relayed chunk by chunk as they arrive; the response's
end is the policy's finish. A server that cannot be reached is taken out (``health.py``) and the
request, not started there, goes to another; a server that breaks off a started request is taken out
and the request fails with 503. ``GET /v1/models`` is the first server's; ``/gateway/state`` shows the
worker table and each worker's counts; ``/health`` answers 200.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.health import ServerHealth
from sglang_fair.gateway.prompt import CHAT, COMPLETIONS, GENERATE, PIN_FIELDS, prompt_tokens, token_source
from sglang_fair.gateway.routing import GatewayRouter, Ticket
from sglang_fair.gateway.servers import WorkerTable, discover
from sglang_fair.gateway.upstream import Unreachable, Upstream, UpstreamError, make_session
from sglang_fair.gateway.usage import StreamCounter, output_tokens
from sglang_fair.routing import NoWorkerError, make_routing_policy
from sglang_fair.sglang_plugin.identity import Unauthorized, resolve_client

logger = logging.getLogger("sglang_fair.gateway")
RELAYED = (CHAT, COMPLETIONS, GENERATE)
RELAYED_HEADERS = frozenset({"retry-after"})  # of a server's answer, besides its content type


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error answer (the same body as ``serve``'s edge)."""
    return JSONResponse({"object": "error", "message": message, "type": kind, "code": status},
                        status_code=status, headers=headers)


class Gateway:
    """What a relayed request needs: the config, the worker table, the router, the servers' client."""

    def __init__(self, config: GatewayConfig, table: WorkerTable, router: GatewayRouter) -> None:
        self.config, self.table, self.router = config, table, router
        self.health = ServerHealth(table, router.policy)
        self.upstream: Upstream | None = None  # set at start-up, in the serving event loop
        self._turn = itertools.count()

    def _servers(self) -> Upstream:
        if self.upstream is None:
            raise RuntimeError("the gateway is not started")
        return self.upstream

    async def tokenize(self, body: dict[str, Any]) -> Any:
        """A server's ``/tokenize`` answer for ``body`` (the servers take turns)."""
        server = self.table.servers[next(self._turn) % len(self.table.servers)]
        return await self._servers().post_json(server.url, "/tokenize", body)

    def client_of(self, request: Request, body: dict[str, Any]) -> str:
        headers = {k.lower(): v for k, v in request.headers.items()}
        return resolve_client(headers, body.get("user"), self.config.key_table, self.config.client_header)

    async def relay(self, request: Request, path: str) -> Response:
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError):
            return error(400, "BadRequest", "the request body is not JSON")
        if not isinstance(body, dict):
            return error(400, "BadRequest", "the request body must be a JSON object")
        try:
            client = self.client_of(request, body)
        except Unauthorized as err:
            return error(401, "Unauthorized", str(err), {"www-authenticate": "Bearer"})
        tokens = await prompt_tokens(token_source(path, body), self.tokenize)
        reasons = []
        for _ in self.table.servers:  # a server not reached did not start the request: try another
            try:
                ticket = self.router.route(client, tokens)
            except NoWorkerError:
                break
            url = ticket.worker.server.url
            try:
                resp = await self._servers().send(url, path, pinned(body, ticket), client)
            except UpstreamError as err:
                self.router.finish(ticket, 0)
                self.health.take_out(url, str(err))
                if isinstance(err, Unreachable):
                    reasons.append(str(err))
                    continue
                return error(503, "ServiceUnavailable", f"worker {ticket.worker.index} broke off: {err}")
            if body.get("stream") and resp.status == 200:
                return RelayedStream(Relay(resp, ticket, self.router))
            return await self._whole(resp, ticket)
        return error(503, "ServiceUnavailable", "no server can take the request: "
                     + ("; ".join(reasons) or "every server is taken out (failed health probes)"))

    async def _whole(self, resp: aiohttp.ClientResponse, ticket: Ticket) -> Response:
        produced = 0
        try:
            data = await resp.read()
            if resp.status == 200:
                produced = output_tokens(json.loads(data))
        except (aiohttp.ClientError, TimeoutError) as err:
            self.health.take_out(ticket.worker.server.url, f"broke off a request: {err}")
            return error(503, "ServiceUnavailable", f"worker {ticket.worker.index} broke off: {err}")
        except ValueError:
            pass
        finally:
            resp.release()
            self.router.finish(ticket, produced)
        kept = {k: v for k, v in resp.headers.items() if k.lower() in RELAYED_HEADERS}
        return Response(data, status_code=resp.status, headers=kept,
                        media_type=resp.headers.get("content-type", "application/json"))


class Relay:
    """One streamed response on its way from a server to a client. :meth:`close` (idempotent) ends it:
    the server's connection is released (dropped when the stream did not end, so the server aborts the
    request) and the policy hears the finish with the output tokens relayed."""

    def __init__(self, resp: aiohttp.ClientResponse, ticket: Ticket, router: GatewayRouter) -> None:
        self.resp, self.ticket, self.router = resp, ticket, router
        self.counter = StreamCounter()
        self.complete = self.closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        """The server's bytes, each as soon as it arrives."""
        try:
            async for chunk in self.resp.content.iter_any():
                self.counter.feed(chunk)
                yield chunk
            self.complete = True
        except (aiohttp.ClientError, TimeoutError) as err:
            logger.warning("worker %d broke off a stream: %s", self.ticket.worker.index, err)
        finally:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.complete:
            self.resp.release()
        else:
            self.resp.close()
        self.router.finish(self.ticket, self.counter.tokens)


class RelayedStream(StreamingResponse):
    """A streaming response that closes its :class:`Relay` however it ends (also when the client left
    before the first chunk, when the relay's generator never ran)."""

    def __init__(self, relay: Relay) -> None:
        super().__init__(relay.chunks(), status_code=200,
                         media_type=relay.resp.headers.get("content-type", "text/event-stream"))
        self.relay = relay

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.relay.close()


def pinned(body: dict[str, Any], ticket: Ticket) -> bytes:
    """``body`` as sent to the ticket's server: the client's pins dropped, the gateway's rank pinned."""
    out = {k: v for k, v in body.items() if k not in PIN_FIELDS}
    rank = ticket.worker.pinned_rank()
    if rank is not None:
        out["routed_dp_rank"] = rank
    return json.dumps(out).encode()


def make_app(gateway: Gateway) -> FastAPI:
    """The gateway's app; its lifespan opens the servers' HTTP session."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        config = gateway.config
        async with make_session(config.request_timeout) as session:
            upstream = gateway.upstream = Upstream(session, config.client_header, config.token)
            watcher = asyncio.create_task(gateway.health.watch(
                lambda url: upstream.healthy(url, config.health_timeout), config.health_interval))
            try:
                yield
            finally:
                watcher.cancel()
                gateway.upstream = None

    app = FastAPI(title="sglang-fair gateway", lifespan=lifespan, docs_url=None, redoc_url=None)

    def relay(path: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await gateway.relay(request, path)
        return endpoint

    for path in RELAYED:
        app.add_api_route(path, relay(path), methods=["POST"])

    async def models() -> Any:
        try:
            return await gateway._servers().get_json(gateway.table.servers[0].url, "/v1/models")
        except UpstreamError as err:
            return error(502, "BadGateway", str(err))

    async def state() -> Any:
        return {**gateway.router.state(), "servers_out": gateway.health.out}

    async def health() -> Any:
        return {"status": "ok"}

    app.add_api_route("/v1/models", models, methods=["GET"])
    app.add_api_route("/gateway/state", state, methods=["GET"])
    app.add_api_route("/health", health, methods=["GET"])
    return app


async def discover_servers(config: GatewayConfig) -> WorkerTable:
    """Ask every server of ``--worker-urls`` what it serves (a ``ConfigError`` if they disagree)."""
    async with make_session(config.discovery_timeout) as session:
        upstream = Upstream(session, config.client_header, config.token)
        return await discover(config.urls(), upstream.get_json, config.discovery_timeout)


def build_gateway(config: GatewayConfig, table: WorkerTable) -> Gateway:
    """The gateway over ``table`` with the configured routing policy (one global tree for all workers)."""
    policy = make_routing_policy(config.routing(len(table)))
    return Gateway(config, table, GatewayRouter(policy, table))


def serve(config: GatewayConfig) -> int:
    """Discover the servers, then serve until interrupted."""
    table = asyncio.run(discover_servers(config))
    gateway = build_gateway(config, table)
    print(f"sglang-fair gateway: {len(table.servers)} servers of {table.model!r}, {len(table)} workers, "
          f"policy {config.router.policy}, on http://{config.host}:{config.port}", flush=True)
    uvicorn.run(make_app(gateway), host=config.host, port=config.port, log_level="warning")
    return 0
