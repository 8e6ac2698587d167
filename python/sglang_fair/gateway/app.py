"""The gateway's HTTP endpoint (FastAPI on uvicorn, as SGLang's own server): the clients' boundary.

``POST /v1/chat/completions``, ``/v1/completions`` and ``/generate``: the client is decided by the
same rules as ``serve`` (``sglang_plugin/identity.py``: key, else header, else ``user``; 401 for a
missing or unknown key when keys are configured), a ``model`` the servers do not serve gets 404
(``sglang_plugin/model_names.py``, unless ``--accept-any-model``), the prompt's token ids are found
(``prompt.py``), the policy picks a worker, and the body goes to that worker's server with
``routed_dp_rank`` pinned (any pin the client sent is dropped), the client named in the identity
header and the gateway's token. Streams are relayed chunk by chunk as they arrive; the response's
end is the policy's finish. A server that cannot be reached is taken out (``health.py``) and the
request, not started there, goes to another; a server that breaks off a started request is taken out
and the request fails with 503. A server whose feedback port (``feedback.py``) says a worker died or
stalled is taken out and its requests in flight are cut: 503 for a whole answer, an error event
ending a stream. ``GET /v1/models`` is the first server's; ``/gateway/state`` shows the worker table,
each worker's counts and what the feedback ports delivered; ``/health`` answers 200.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.feedback import FeedbackListener, OwnPause
from sglang_fair.gateway.health import ServerHealth
from sglang_fair.gateway.peers import run_link
from sglang_fair.gateway.prompt import CHAT, COMPLETIONS, GENERATE, prompt_tokens, token_source
from sglang_fair.gateway.relay import Cut, Relay, RelayedStream, pinned, where
from sglang_fair.gateway.replication import Replication
from sglang_fair.gateway.routing import GatewayRouter, Ticket
from sglang_fair.gateway.servers import WorkerTable
from sglang_fair.gateway.upstream import Unreachable, Upstream, UpstreamError, make_session
from sglang_fair.gateway.usage import output_tokens
from sglang_fair.routing import NoWorkerError
from sglang_fair.routing.clients import ClientOverLimit
from sglang_fair.sglang_plugin.edge_limits import EdgeLimitsMiddleware
from sglang_fair.sglang_plugin.identity import Unauthorized, error_body, resolve_client
from sglang_fair.sglang_plugin.model_names import NOT_FOUND, refusal

logger = logging.getLogger("sglang_fair.gateway")
RELAYED = (CHAT, COMPLETIONS, GENERATE)
RELAYED_HEADERS = frozenset({"retry-after"})  # of a server's answer, besides its content type


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An OpenAI-style error answer (the same body as ``serve``'s edge)."""
    return JSONResponse(error_body(status, kind, message), status_code=status, headers=headers)


class Gateway:
    """What a relayed request needs: the config, the worker table, the router, the servers' client."""

    def __init__(self, config: GatewayConfig, table: WorkerTable, router: GatewayRouter,
                 listener: FeedbackListener | None = None, replication: Replication | None = None) -> None:
        self.config, self.table, self.router, self.listener = config, table, router, listener
        self.replication = replication
        self.model_names = None if config.accept_any_model else table.model_names()
        self.health = ServerHealth(table, router.policy, config.health_failures)
        self.upstream: Upstream | None = None  # set at start-up, in the serving event loop
        self.cuts: dict[str, asyncio.Event] = {}  # server URL -> set when feedback takes it out
        self.streams: dict[str, set[Relay]] = {}  # server URL -> the streams relayed from it now
        self.answered: dict[int, float] = {}  # worker -> when its answers last brought tokens
        self.failed_over = 0  # requests a server could not be reached for, tried at another
        self.picker: Any = None  # the endpoint picker (--ext-proc-port, epp_front.start_picker)
        self._turn = itertools.count()

    async def watch_feedback(self, interval: float) -> None:
        """Every ``interval`` s: take out (cutting its requests) or back each server with a feedback port."""
        assert self.listener is not None
        busy = self.router.policy.queue.__getitem__

        def answered(worker: int) -> float:
            return self.answered.get(worker, -math.inf)

        pause = OwnPause(self.config.heartbeat_timeout / 2, time.monotonic())
        while True:
            await asyncio.sleep(interval)
            if pause.late(time.monotonic()):
                continue
            for url, why in self.listener.verdicts(lambda w: busy(w) > 0, answered):
                held = "feedback" in self.health.reasons.get(url, {})
                if why is None and held:
                    self.health.take_back(url, "feedback")
                    self.cuts.pop(url, None)
                elif why is not None and not held:
                    self.health.take_out(url, why, "feedback")
                    self.cuts.setdefault(url, asyncio.Event()).set()
                    for relay in list(self.streams.get(url, ())):
                        relay.cut(why)

    async def until_cut(self, url: str, work: Awaitable[Any]) -> Any:
        """``work``'s result, unless feedback takes the server at ``url`` out first (:class:`Cut`)."""
        if self.listener is None:
            return await work
        cut = self.cuts.setdefault(url, asyncio.Event())
        task, stop = asyncio.ensure_future(work), asyncio.ensure_future(cut.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the client left: the work goes too, and what it got is closed
            task.cancel()
            task.add_done_callback(close_result)
            raise
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            raise Cut(self.health.out.get(url, "taken out"))
        return task.result()

    def heard(self, ticket: Ticket) -> None:
        """The ticket's worker sent tokens now (what keeps it in when its feedback falls silent)."""
        self.answered[ticket.worker.index] = time.monotonic()

    def _servers(self) -> Upstream:
        if self.upstream is None:
            raise RuntimeError("the gateway is not started")
        return self.upstream

    async def tokenize(self, body: dict[str, Any]) -> Any:
        """A server's ``/tokenize`` answer for ``body``, within ``--health-timeout`` (the servers not
        taken out take turns; a failure routes the request on no tokens, ``prompt.py``)."""
        servers = [s for s in self.table.servers if s.url not in self.health.reasons] or self.table.servers
        server = servers[next(self._turn) % len(servers)]
        return await self._servers().post_json(server.url, "/tokenize", body, self.config.health_timeout)

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
        if (refused := refusal(path, body, self.model_names)) is not None:
            return JSONResponse(refused, status_code=NOT_FOUND)
        tokens = await prompt_tokens(token_source(path, body), self.tokenize)
        reasons = []
        for _ in self.table.servers:  # a server not reached did not start the request: try another
            try:
                ticket = self.router.route(client, tokens)
            except NoWorkerError:
                break
            except ClientOverLimit as err:
                return error(429, "TooManyRequests", str(err), {"retry-after": "1"})
            url = ticket.worker.server.url
            try:
                sent = self._servers().send(url, path, pinned(body, ticket), client)
                resp = await self.until_cut(url, sent)
            except Cut as err:
                self.router.finish(ticket, 0)
                return taken_out(ticket, err)
            except UpstreamError as err:
                self.router.finish(ticket, 0)
                self.health.take_out(url, str(err))
                if isinstance(err, Unreachable):
                    reasons.append(str(err))
                    self.failed_over += 1
                    continue
                return error(503, "ServiceUnavailable", f"worker {ticket.worker.index} broke off: {err}")
            if body.get("stream") and resp.status == 200:
                return RelayedStream(Relay(resp, ticket, self.router, self.streams.setdefault(url, set()),
                                           functools.partial(self.heard, ticket)))
            return await self._whole(resp, ticket)
        return error(503, "ServiceUnavailable", "no server can take the request: "
                     + ("; ".join(reasons) or "every server is taken out (failed health probes)"))

    async def _whole(self, resp: aiohttp.ClientResponse, ticket: Ticket) -> Response:
        produced = 0
        url = ticket.worker.server.url
        try:
            data = await self.until_cut(url, resp.read())
            if resp.status == 200:
                self.heard(ticket)
                produced = output_tokens(json.loads(data))
        except Cut as err:
            resp.close()
            return taken_out(ticket, err)
        except (aiohttp.ClientError, TimeoutError) as err:
            self.health.take_out(url, f"broke off a request: {err}")
            return error(503, "ServiceUnavailable", f"worker {ticket.worker.index} broke off: {err}")
        except ValueError:
            pass
        finally:
            resp.release()
            self.router.finish(ticket, produced)
        kept = {k: v for k, v in resp.headers.items() if k.lower() in RELAYED_HEADERS}
        return Response(data, status_code=resp.status, headers=kept,
                        media_type=resp.headers.get("content-type", "application/json"))


def close_result(task: asyncio.Future[Any]) -> None:
    """Close what a finished ``task`` returned (a server's response nobody will read)."""
    if not task.cancelled() and task.exception() is None:
        close = getattr(task.result(), "close", None)
        if callable(close):
            close()


def taken_out(ticket: Ticket, why: Exception) -> JSONResponse:
    return error(503, "ServiceUnavailable", f"{where(ticket)} was taken out: {why}")


def make_app(gateway: Gateway) -> FastAPI:
    """The gateway's app; its lifespan opens the servers' HTTP session."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        config = gateway.config
        async with make_session(config.request_timeout, config.connect_timeout) as session:
            upstream = gateway.upstream = Upstream(session, config.client_header, config.token)
            tasks = [asyncio.create_task(gateway.health.watch(
                lambda url: upstream.healthy(url, config.health_timeout), config.health_interval))]
            if gateway.router.clients.ttl > 0:
                tasks.append(asyncio.create_task(every(min(60.0, gateway.router.clients.ttl / 2),
                                                       gateway.router.expire)))
            if gateway.listener is not None:
                tasks += [asyncio.create_task(gateway.listener.run()),
                          asyncio.create_task(gateway.watch_feedback(min(0.5, config.heartbeat_timeout / 4)))]
            if gateway.replication is not None:
                replication = gateway.replication
                tasks.append(asyncio.create_task(run_link(replication.link, replication.on_notice,
                                                          replication.tick)))
            if config.ext_proc.port:
                from sglang_fair.gateway.epp_front import start_picker
                gateway.picker = await start_picker(gateway)
            try:
                yield
            finally:
                if gateway.picker is not None:
                    await gateway.picker.stop()
                for task in tasks:
                    task.cancel()
                gateway.upstream = None
                if gateway.replication is not None:
                    gateway.replication.link.close()

    app = FastAPI(title="sglang-fair gateway", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_middleware(EdgeLimitsMiddleware, max_body_bytes=gateway.config.max_body_bytes)

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
        heard = gateway.listener.view() if gateway.listener is not None else None
        peers = gateway.replication.view() if gateway.replication is not None else None
        return {**gateway.router.state(), "servers_out": gateway.health.out, "feedback": heard,
                "peers": peers, "failed_over": gateway.failed_over,
                "ext_proc": gateway.picker.picker.view() if gateway.picker is not None else None}

    async def health() -> Any:
        return {"status": "ok"}

    app.add_api_route("/v1/models", models, methods=["GET"])
    app.add_api_route("/gateway/state", state, methods=["GET"])
    app.add_api_route("/health", health, methods=["GET"])
    return app


async def every(interval: float, call: Callable[[], object]) -> None:
    """Call ``call`` every ``interval`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        call()
