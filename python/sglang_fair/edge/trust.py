"""Who may pin a request to a data-parallel rank: only a gateway that holds the shared token.

SGLang 0.5.23 lets any caller pick the worker: ``routed_dp_rank`` (or its deprecated alias
``data_parallel_rank``) in the JSON body, the ``X-Data-Parallel-Rank`` header (chat and completions)
and, when SGLang's header overrides are on, ``X-Override-Routed-Dp-Rank``. The DP controller sends
such a request straight to that rank, past the fair router. :class:`PinnedRankMiddleware` refuses
every such request with 403 (an OpenAI-style error body) unless it carries the token of
``--gateway-token-file`` in :data:`TOKEN_HEADER`; a request that does carry it is marked trusted in
the scope (:data:`TRUST_KEY`), and the identity middleware then takes the client it names in the
identity header even when keys are configured (the gateway checked the client's key). A pin that
escapes the byte-level check (a JSON key written with escapes) is still refused, with 400, by the
tokenizer-manager hook, which reads the parsed request (``http_hooks.generate_request``).

Refusing rather than stripping the pin: a client that asks for a rank learns at once that it cannot
have one, instead of getting a different worker than it asked for without a word.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.asgi import ASGIApp, Receive, Scope, Send, buffer_body, headers_of, scope_state
from sglang_fair.edge.errors import send_error
from sglang_fair.edge.keys import read_lines

TOKEN_HEADER = "x-sglang-fair-gateway-token"
TRUST_KEY = "sglang_fair_gateway"  # in the scope's state: the request carries the gateway's token
PIN_HEADERS = ("x-data-parallel-rank", "x-override-routed-dp-rank")
PIN_FIELDS = ("routed_dp_rank", "data_parallel_rank")
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class GatewayToken:
    """The secret a trusted gateway sends in :data:`TOKEN_HEADER` (empty: no gateway is trusted)."""

    token: str = field(default="", repr=False)

    @property
    def enabled(self) -> bool:
        return bool(self.token)

    def accepts(self, headers: Mapping[str, str]) -> bool:
        """Do ``headers`` (lower-cased names) carry this token? (Constant-time comparison.)"""
        sent = headers.get(TOKEN_HEADER)
        return self.enabled and sent is not None and hmac.compare_digest(sent.encode(), self.token.encode())


def load_token_file(path: str) -> GatewayToken:
    """The token in ``path`` (its first line, stripped; at least :data:`MIN_TOKEN_CHARS` characters)."""
    lines = read_lines(path, "--gateway-token-file")
    token = lines[0].strip() if lines else ""
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise ConfigError(f"--gateway-token-file {path}: the first line must be one token of at least "
                          f"{MIN_TOKEN_CHARS} characters without spaces (e.g. from `openssl rand -hex 32`)")
    return GatewayToken(token)


def is_trusted(scope: Mapping[str, Any] | None) -> bool:
    """Did :class:`PinnedRankMiddleware` find the gateway's token on this request?"""
    state = (scope or {}).get("state")
    return isinstance(state, Mapping) and state.get(TRUST_KEY) is True


def pinned_rank(headers: Mapping[str, str], body: bytes) -> str | None:
    """How a request pins a rank (the header or body field), or None."""
    for name in PIN_HEADERS:
        if name in headers:
            return f"the {name} header"
    if not any(f.encode() in body for f in PIN_FIELDS):
        return None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, dict):
        for name in PIN_FIELDS:
            if data.get(name) is not None:
                return f"the body field {name}"
    return None


def pin_refusal(how: str, router: bool) -> str:
    """The 403 message for a request that pins a rank by ``how``: what to do instead, with the global
    router (it picks the worker) or without (only the gateway of ``--gateway-token-file`` may pin)."""
    reason = f"{how} pins a data-parallel rank, which only a trusted gateway may do"
    if router:
        return f"{reason}: send the request without it and the fair router picks the worker"
    return (f"{reason} (one sending the token of this server's --gateway-token-file in the "
            f"{TOKEN_HEADER} header): send the request without it")


class PinnedRankMiddleware:
    """ASGI middleware: marks requests carrying the gateway token trusted, refuses pinned ranks from
    any other caller with 403 (``router``: the global router routes, which the message says)."""

    def __init__(self, app: ASGIApp, token: GatewayToken, router: bool = False) -> None:
        self.app, self.token, self.router = app, token, router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = headers_of(scope)
        trusted = self.token.accepts(headers)
        scope_state(scope)[TRUST_KEY] = trusted
        if not trusted:
            body = b""
            if scope.get("method") == "POST":
                body, receive = await buffer_body(receive, scope)
            how = pinned_rank(headers, body)
            if how is not None:
                await send_error(send, 403, "Forbidden", pin_refusal(how, self.router))
                return
        await self.app(scope, receive, send)

