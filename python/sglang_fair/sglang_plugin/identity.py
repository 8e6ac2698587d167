"""Client identity at the HTTP edge: API key, else header, else the OpenAI ``user`` field, else default.

:func:`resolve_client` is the rule; :class:`ClientIdentityMiddleware` applies it to every HTTP request
(an ASGI middleware, so native ``/generate`` and the OpenAI endpoints, streaming or not, are covered
alike) and stores the client in the request scope; the tokenizer-manager hook copies it into the
request's ``routing_key``, which SGLang carries to the scheduler. With keys configured an unknown or
missing key is answered 401 and the header is ignored, so a client cannot claim another's share.
Websocket connections (SGLang's ``/v1/realtime``) are checked the same way (refused with close code
1008, which the server answers 403). With keys configured, ``/fairness`` and ``/metrics`` (they name
every client) need a key too; which rows a key may read is the endpoint's decision.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from sglang_fair.sglang_plugin.keys import KeyTable

DEFAULT_CLIENT = "default"
SCOPE_KEY = "sglang_fair_client"
TRUST_KEY = "sglang_fair_gateway"  # set by gateway_trust.PinnedRankMiddleware
BODY_KEY, JSON_KEY = "sglang_fair_body", "sglang_fair_json"  # the request body, read once (buffer_body)
OPEN_PATHS = frozenset({"/health", "/health_generate", "/metrics", "/fairness", "/sglang_fair/feedback",
                        "/fairness/ui"})  # the page holds no figures; its data is keyed
CLIENT_LISTING_PATHS = frozenset({"/metrics", "/fairness"})  # need a key when keys are configured
WARMUP_CLIENT = "__warmup__"
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_CLIENT_LEN = 128

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Unauthorized(Exception):
    """The request carries no key, or a key the key file does not list."""


def bearer_key(headers: Mapping[str, str]) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header (or of ``X-API-Key``)."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None


def resolve_client(
    headers: Mapping[str, str], body_user: object, keys: KeyTable, header: str, gateway: bool = False
) -> str:
    """The client of one request (``headers`` lower-cased). Raises :class:`Unauthorized`.

    ``gateway``: the request comes from a trusted gateway (``gateway_trust.py``), which checked the
    client's key itself; the client it names in ``header`` is taken even when keys are configured."""
    named = headers.get(header.lower(), "").strip()
    if gateway and named:
        return named[:MAX_CLIENT_LEN]
    if keys.enabled:
        key = bearer_key(headers)
        if key is None or key not in keys.clients:
            raise Unauthorized("missing API key" if key is None else "unknown API key")
        return keys.clients[key]
    if named:
        return named[:MAX_CLIENT_LEN]
    if isinstance(body_user, str) and body_user.strip():
        return body_user.strip()[:MAX_CLIENT_LEN]
    return DEFAULT_CLIENT


def parse_json(body: bytes) -> object:
    """A JSON body, or None if it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def is_trusted(scope: Mapping[str, Any] | None) -> bool:
    """Did ``gateway_trust.PinnedRankMiddleware`` find the gateway's token on this request?"""
    state = (scope or {}).get("state")
    return isinstance(state, Mapping) and state.get(TRUST_KEY) is True


class ClientIdentityMiddleware:
    """ASGI middleware: resolves the client, answers 401 when keys are configured and do not match.

    ``local_hosts``: addresses besides loopback that SGLang's own warm-up connects from (the server's
    ``--host``), let through without a key only while ``warmup_open()``. ``admins``: the clients whose
    keys may read ``/metrics`` when keys are configured (others get 403). ``max_inflight`` (> 0): a
    client with that many POST requests in flight gets 429 with ``Retry-After`` for the next one."""

    def __init__(self, app: ASGIApp, keys: KeyTable, header: str, warmup_open: Callable[[], bool],
                 local_hosts: frozenset[str] = frozenset(), admins: frozenset[str] = frozenset(),
                 max_inflight: int = 0) -> None:
        self.app, self.keys, self.header, self.warmup_open = app, keys, header, warmup_open
        self.admins, self.max_inflight = admins, max_inflight
        self.inflight: dict[str, int] = {}  # client -> POST requests in flight (only while > 0)
        self.local_hosts = LOOPBACK | local_hosts
        self.open_paths = OPEN_PATHS - CLIENT_LISTING_PATHS if keys.enabled else OPEN_PATHS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket") or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        body_user: object = None
        if (kind == "http" and not self.keys.enabled and self.header.lower() not in headers
                and scope.get("method") == "POST"):
            data, receive = await json_body(scope, receive)
            body_user = data.get("user") if isinstance(data, dict) else None
        try:
            client = resolve_client(headers, body_user, self.keys, self.header, is_trusted(scope))
        except Unauthorized as err:
            if not (self.warmup_open() and (scope.get("client") or ("", 0))[0] in self.local_hosts):
                await (_send_401(send, str(err)) if kind == "http" else _refuse_websocket(send))
                return
            client = WARMUP_CLIENT
        if self.keys.enabled and scope.get("path") == "/metrics" and client not in self.admins:
            await send_error(send, 403, "Forbidden", "/metrics needs a key of a --fairness-admins client")
            return
        scope.setdefault("state", {})[SCOPE_KEY] = client
        if self.max_inflight <= 0 or scope.get("method") != "POST" or client == WARMUP_CLIENT:
            await self.app(scope, receive, send)
            return
        held = self.inflight.get(client, 0)
        if held >= self.max_inflight:
            reason = f"client {client!r} already has {held} requests in flight (the limit); retry later"
            await send_error(send, 429, "TooManyRequests", reason, [(b"retry-after", b"1")])
            return
        await self._in_flight(client, scope, receive, send)

    async def _in_flight(self, client: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request holding one of ``client``'s slots until its answer's last byte is sent (SGLang's
        streams then run a 2 s abort task before the app returns: the slot is not held for it)."""
        self.inflight[client] = self.inflight.get(client, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                left = self.inflight[client] - 1
                if left:
                    self.inflight[client] = left
                else:
                    del self.inflight[client]

        async def send_then_release(message: Message) -> None:
            await send(message)
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                release()

        try:
            await self.app(scope, receive, send_then_release)
        finally:
            release()


def resolve_hosts(host: str | None) -> frozenset[str]:
    """The addresses ``host`` (SGLang's ``--host``) stands for; empty if it cannot be resolved."""
    import socket

    if not host or host in ("0.0.0.0", "::"):
        return frozenset()
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return frozenset({host})
    return frozenset({host} | {str(info[4][0]) for info in infos})


async def _refuse_websocket(send: Send) -> None:
    await send({"type": "websocket.close", "code": 1008, "reason": "missing or unknown API key"})


async def buffer_body(receive: Receive, scope: Scope | None = None) -> tuple[bytes, Receive]:
    """Read the whole request body and return it with a ``receive`` that replays it. With ``scope`` the
    body is read once per request: it is kept in the scope's state, and a later call (an inner
    middleware, whose ``receive`` replays it already) gets it back with ``receive`` as it is."""
    state = scope.setdefault("state", {}) if scope is not None else {}
    if BODY_KEY in state:
        return state[BODY_KEY], receive
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body"))
    body = state[BODY_KEY] = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay


async def json_body(scope: Scope, receive: Receive) -> tuple[object, Receive]:
    """The request's JSON body (None if it is not JSON), read and parsed once per request
    (:func:`buffer_body`), with a ``receive`` that replays it."""
    body, receive = await buffer_body(receive, scope)
    state = scope["state"]
    if JSON_KEY not in state:
        state[JSON_KEY] = parse_json(body)
    return state[JSON_KEY], receive


async def _send_401(send: Send, reason: str) -> None:
    await send_error(send, 401, "Unauthorized", reason, [(b"www-authenticate", b"Bearer")])


def error_body(status: int, kind: str, message: str, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body, the fields of SGLang's own ``ErrorResponse``: ``object``, ``message``,
    ``type``, ``param`` (only when one field of the request is at fault) and ``code`` (the status);
    ``serve``'s edge and the gateway answer with it."""
    body: dict[str, Any] = {"object": "error", "message": message, "type": kind}
    if param is not None:
        body["param"] = param
    return {**body, "code": status}


async def send_error(send: Send, status: int, kind: str, reason: str,
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer with :func:`error_body` (``extra``: more response headers)."""
    await send_json(send, status, error_body(status, kind, reason), extra)


async def send_json(send: Send, status: int, body: Mapping[str, Any],
                    extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """Answer ``status`` with the JSON ``body``."""
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"), *(extra or [])],
    })
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})
