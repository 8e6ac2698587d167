"""The endpoint picker: the gateway's second front, for the Kubernetes Gateway API Inference Extension.

A Gateway API implementation with Envoy's ext_proc filter (Envoy Gateway, kgateway, Istio, GKE) asks
it, over one gRPC stream per HTTP request, which server takes the request; the proxy then sends the
request there itself (``epp/protocol.py``). :class:`Exchange` is one such stream: once it has the whole
body it decides as the HTTP gateway does, through :class:`PickerFront` (identity, the model check, the
prompt's token ids, the routing policy with its tree, per-client bound, feedback and replicas), and
answers the server's ``ip:port`` with the body pinned to the chosen rank and the client and gateway
token set for the server; or an immediate 400/401/404/413/429/503. The response's body passes back
through it, so its end is the policy's finish with the output tokens it carried, as in the HTTP front.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from sglang_fair.edge.errors import error_body
from sglang_fair.edge.identity import Unauthorized
from sglang_fair.edge.trust import PIN_HEADERS
from sglang_fair.gateway import peer_dns
from sglang_fair.gateway.epp import messages as m
from sglang_fair.gateway.epp import protocol as p
from sglang_fair.gateway.prompt import CHAT, COMPLETIONS, GENERATE
from sglang_fair.gateway.routing import Ticket
from sglang_fair.gateway.servers import ServerInfo
from sglang_fair.gateway.usage import StreamCounter, output_tokens
from sglang_fair.routing import NoWorkerError
from sglang_fair.routing.clients import ClientOverLimit

logger = logging.getLogger("sglang_fair.gateway")
ROUTED = (CHAT, COMPLETIONS, GENERATE)
ANY_SERVER = ("/v1/models", "/health")  # GET: any server not taken out, nothing charged


class PickerFront(Protocol):
    """What the picker needs of the gateway (``epp_front.GatewayFront`` over the HTTP gateway's parts)."""

    max_body_bytes: int

    def client(self, headers: Mapping[str, str], body: dict[str, Any]) -> str:
        """The request's client (raises ``Unauthorized``)."""

    def refusal(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The 404 body for a model the servers do not serve, else None."""

    async def tokens(self, path: str, body: dict[str, Any]) -> list[int]:
        """The prompt's token ids, as the server will see them."""

    def route(self, client: str, tokens: list[int], servers: Collection[str] | None) -> Ticket:
        """Pick a worker (of the servers at URLs ``servers`` only, unless None); raises
        ``ClientOverLimit`` and ``NoWorkerError``."""

    def pinned(self, body: dict[str, Any], ticket: Ticket) -> bytes:
        """The body as sent to the ticket's server (its rank pinned)."""

    def upstream_headers(self, client: str) -> dict[str, str]:
        """The headers the servers read: the client named, the gateway's token."""

    def finish(self, ticket: Ticket, output_tokens: int) -> None: ...

    def heard(self, ticket: Ticket) -> None:
        """The ticket's worker sent tokens now."""

    def servers(self) -> list[ServerInfo]:
        """The servers not taken out."""


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Any:
    return p.immediate(status, error_body(status, kind, message), headers)


class Picker:
    """The picker's shared part: the front, the servers' addresses, the counts."""

    def __init__(self, front: PickerFront, clock: Callable[[], float] = time.monotonic) -> None:
        self.front, self.clock = front, clock
        self.counts: Counter[str] = Counter()
        self._turn = 0
        self._resolved: dict[str, tuple[float, str]] = {}  # server URL -> (when, ip:port)

    async def endpoint(self, server: ServerInfo) -> str:
        """The server's ``ip:port``: its URL's host resolved at most ``peer_dns.RESOLVE_EVERY_S`` ago
        (a pod that restarts has a new address under the same name)."""
        when, known = self._resolved.get(server.url, (0.0, ""))
        if known and self.clock() - when < peer_dns.RESOLVE_EVERY_S:
            return known
        parts = urlsplit(server.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = await peer_dns.resolve(parts.hostname or "", port)
        if not addresses:
            raise OSError(f"{parts.hostname} has no address")
        self._resolved[server.url] = (self.clock(), f"{addresses[0]}:{port}")
        return self._resolved[server.url][1]

    async def any_server(self) -> str:
        servers = self.front.servers()
        if not servers:
            raise NoWorkerError("every server is taken out")
        self._turn += 1
        return await self.endpoint(servers[self._turn % len(servers)])

    async def allowed(self, subset: list[str] | None) -> list[str] | None:
        """The URLs of the servers whose endpoint the data plane allows (None: all)."""
        if subset is None:
            return None
        return [s.url for s in self.front.servers() if await self.endpoint(s) in subset]

    async def process(self, requests: AsyncIterator[Any], context: Any = None) -> AsyncIterator[Any]:
        """The ext_proc ``Process`` stream of one HTTP request."""
        exchange = Exchange(self)
        try:
            async for request in requests:
                for response in await exchange.on(request):
                    yield response
        finally:
            exchange.close()

    def view(self) -> dict[str, int]:
        return dict(self.counts)


class Exchange:
    """One HTTP request as the data plane streams it (single event loop: no locking)."""

    def __init__(self, picker: Picker) -> None:
        self.picker, self.front = picker, picker.front
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.subset: list[str] | None = None
        self.buffered = False  # the data plane sends the request body BUFFERED, not FULL_DUPLEX_STREAMED
        self.ticket: Ticket | None = None
        self.endpoint = ""
        self.forward = b""  # the body as the server gets it (its rank pinned)
        self.counter = StreamCounter()
        self.answer = bytearray()  # a whole (not streamed) answer, for its usage
        self.streamed = self.ok = self.done = self.refused = False

    async def on(self, request: Any) -> list[Any]:
        """The answers to one message of the data plane (none while a body is still coming)."""
        if self.refused:  # an immediate response ended the exchange; the data plane sends no more
            return []
        if request.HasField("protocol_config"):
            self.buffered = request.protocol_config.request_body_mode == m.BUFFERED
        kind = request.WhichOneof("request")
        if kind == "request_headers":
            self.headers, self.subset = p.headers_of(request.request_headers), p.subset(request)
            return await self.decide() if request.request_headers.end_of_stream else []
        if kind == "request_body":
            self.body += request.request_body.body
            if self.front.max_body_bytes and len(self.body) > self.front.max_body_bytes:
                self.refused = True
                return [error(413, "RequestTooLarge", f"the body exceeds {self.front.max_body_bytes} bytes")]
            return await self.decide() if request.request_body.end_of_stream else []
        if kind == "request_trailers":
            return [*(await self.decide()), p.passed("request_trailers")]
        if kind == "response_headers":
            return self.response_headers(request)
        if kind == "response_body":
            return self.response_body(request.response_body)
        if kind == "response_trailers":
            self.close()
            return [p.passed("response_trailers")]
        return []

    async def decide(self) -> list[Any]:
        """The answer to the whole request: where it goes (with its body), or an immediate response."""
        if self.endpoint:
            return []
        counts = self.picker.counts
        answer = await self._decide()
        status = answer.immediate_response.status.code if answer.HasField("immediate_response") else 200
        counts["picked" if status == 200 else f"refused_{status}"] += 1
        if status != 200:
            self.refused = True
            return [answer]
        body = self.forward if self.ticket is not None else bytes(self.body)  # unrouted: as it came
        if not body and self.ticket is None:
            return [answer]
        more = [p.whole_body(body)] if self.buffered else list(p.body_chunks(body, "request_body"))
        return [answer, *more]

    async def _decide(self) -> Any:
        path = self.headers.get(":path", "").split("?")[0]
        if path not in ROUTED:
            if path in ANY_SERVER and self.headers.get(":method") == "GET":
                try:
                    self.endpoint = await self.picker.any_server()
                except (NoWorkerError, OSError) as err:
                    return error(503, "ServiceUnavailable", f"no server can take the request: {err}")
                return p.route_to(self.endpoint, {}, PIN_HEADERS)
            return error(404, "NotFound", f"{path or 'the path'} is not served here")
        try:
            body = json.loads(self.body)
        except (ValueError, UnicodeDecodeError):
            return error(400, "BadRequest", "the request body is not JSON")
        if not isinstance(body, dict):
            return error(400, "BadRequest", "the request body must be a JSON object")
        try:
            client = self.front.client(self.headers, body)
        except Unauthorized as err:
            return error(401, "Unauthorized", str(err), {"www-authenticate": "Bearer"})
        if (refused := self.front.refusal(path, body)) is not None:
            return p.immediate(404, refused)
        tokens = await self.front.tokens(path, body)
        try:
            servers = await self.picker.allowed(self.subset)
            self.ticket = self.front.route(client, tokens, servers)
            self.endpoint = await self.picker.endpoint(self.ticket.worker.server)
        except ClientOverLimit as err:
            return error(429, "TooManyRequests", str(err), {"retry-after": "1"})
        except (NoWorkerError, OSError) as err:
            self.close()
            return error(503, "ServiceUnavailable", f"no server can take the request: {err}")
        self.forward = self.front.pinned(body, self.ticket)
        headers = {**self.front.upstream_headers(client), "content-length": str(len(self.forward))}
        return p.route_to(self.endpoint, headers, PIN_HEADERS)

    def response_headers(self, request: Any) -> list[Any]:
        headers = p.headers_of(request.response_headers)
        self.ok = headers.get(":status") == "200"
        self.streamed = "text/event-stream" in headers.get("content-type", "")
        served = p.served(request)
        if served is not None and self.endpoint and served != self.endpoint:
            self.picker.counts["served_elsewhere"] += 1
            logger.warning("gateway: the data plane sent a request picked for %s to %s",
                           self.endpoint, served)
        if request.response_headers.end_of_stream:
            self.close()
        return [p.passed("response_headers")]

    def response_body(self, body: Any) -> list[Any]:
        if self.ticket is not None and body.body:
            self.front.heard(self.ticket)
            if self.streamed:
                self.counter.feed(body.body)
            elif len(self.answer) < self.front.max_body_bytes or not self.front.max_body_bytes:
                self.answer += body.body
        if body.end_of_stream:
            self.close()
        return list(p.body_chunks(body.body, "response_body", end=body.end_of_stream))

    def close(self) -> None:
        """The exchange ended (the response's end, or the stream closed): the policy's finish, once."""
        if self.done or self.ticket is None:
            return
        self.done = True
        produced = self.counter.tokens if self.streamed else 0
        if not self.streamed and self.ok:
            try:
                produced = output_tokens(json.loads(self.answer))
            except (ValueError, UnicodeDecodeError):
                produced = 0
        self.front.finish(self.ticket, produced)
