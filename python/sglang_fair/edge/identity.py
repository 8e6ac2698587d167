"""Client identity at the HTTP edge: API key, else header, else the OpenAI ``user`` field, else default.

:func:`resolve_client` is the rule (``serve`` and the gateway apply the same);
:class:`ClientIdentityMiddleware` applies it to every HTTP request of ``serve`` (an ASGI middleware, so
native ``/generate`` and the OpenAI endpoints, streaming or not, are covered alike) and stores the
client in the request scope; the tokenizer-manager hook copies it into the request's ``routing_key``,
which SGLang carries to the scheduler. With keys configured an unknown or missing key is answered 401
and the header is ignored, so a client cannot claim another's share. Websocket connections (SGLang's
``/v1/realtime``) are checked the same way (refused with close code 1008, which the server answers
403). With keys configured, ``/fairness`` and ``/metrics`` (they name every client) need a key too;
which rows a key may read is the endpoint's decision (``admins.py`` for ``/metrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sglang_fair.edge.asgi import ASGIApp, Receive, Scope, Send, headers_of, json_body, scope_state
from sglang_fair.edge.errors import send_error
from sglang_fair.edge.keys import KeyTable
from sglang_fair.edge.reload import LiveTenants, live
from sglang_fair.edge.trust import is_trusted

DEFAULT_CLIENT = "default"
SCOPE_KEY = "sglang_fair_client"
OPEN_PATHS = frozenset({"/health", "/health_generate", "/metrics", "/fairness", "/sglang_fair/feedback",
                        "/fairness/ui"})  # the page holds no figures; its data is keyed
CLIENT_LISTING_PATHS = frozenset({"/metrics", "/fairness"})  # need a key when keys are configured
WARMUP_CLIENT = "__warmup__"  # SGLang's start-up request
PROBE_CLIENT = "__probe__"  # the one-token request of SGLang's /health and /health_generate
INTERNAL_CLIENTS = frozenset({WARMUP_CLIENT, PROBE_CLIENT})  # the server's own requests: not clients
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_CLIENT_LEN = 128


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

    ``gateway``: the request comes from a trusted gateway (``trust.py``), which checked the client's key
    itself; the client it names in ``header`` is taken even when keys are configured."""
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


def client_in(scope: Scope) -> str | None:
    """The client :class:`ClientIdentityMiddleware` resolved for this request (None: an open path)."""
    state = scope.get("state")
    client = state.get(SCOPE_KEY) if isinstance(state, Mapping) else None
    return client if isinstance(client, str) else None


class ClientIdentityMiddleware:
    """ASGI middleware: resolves the client into the scope, answers 401 when keys are configured and do
    not match.

    ``local_hosts``: addresses besides loopback that SGLang's own warm-up connects from (the server's
    ``--host``), let through without a key (as :data:`WARMUP_CLIENT`) only while ``warmup_open()``;
    a request from there that names no client in that window is the warm-up too, with or without keys.
    ``keys``: a fixed table, or the :class:`~sglang_fair.edge.reload.LiveTenants` a reload replaces (each
    request reads the table in force; a reloaded file always has keys, so keyed stays keyed)."""

    def __init__(self, app: ASGIApp, keys: KeyTable | LiveTenants, header: str,
                 warmup_open: Callable[[], bool], local_hosts: frozenset[str] = frozenset()) -> None:
        self.app, self.live, self.header, self.warmup_open = app, live(keys), header, warmup_open
        self.local_hosts = LOOPBACK | local_hosts
        self.open_paths = OPEN_PATHS - CLIENT_LISTING_PATHS if self.live.table.enabled else OPEN_PATHS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket") or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = headers_of(scope)
        keys = self.live.table
        body_user: object = None
        if (kind == "http" and not keys.enabled and self.header.lower() not in headers
                and scope.get("method") == "POST"):
            data, receive = await json_body(scope, receive)
            body_user = data.get("user") if isinstance(data, dict) else None
        warmup = self.warmup_open() and (scope.get("client") or ("", 0))[0] in self.local_hosts
        try:
            client = resolve_client(headers, body_user, keys, self.header, is_trusted(scope))
        except Unauthorized as err:
            if not warmup:
                await (_send_401(send, str(err)) if kind == "http" else _refuse_websocket(send))
                return
            client = WARMUP_CLIENT
        if warmup and client == DEFAULT_CLIENT:
            client = WARMUP_CLIENT  # SGLang's warm-up, sent without a name: not the client `default`
        scope_state(scope)[SCOPE_KEY] = client
        await self.app(scope, receive, send)


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


async def _send_401(send: Send, reason: str) -> None:
    await send_error(send, 401, "Unauthorized", reason, [(b"www-authenticate", b"Bearer")])
