"""The gateway's one HTTP boundary to the servers (:mod:`sglang_fair.gateway.http1`, kept-alive
HTTP/1.1 connections).

Every request carries the gateway's token (``--gateway-token-file``; the server then accepts its
pinned rank and the client it names) and the client in the identity header. Failures to reach a
server, or an answer that is not a 200 JSON object where one is needed, raise :class:`UpstreamError`
(:class:`Unreachable` when no connection was made, so the request was not started there).
"""

from __future__ import annotations

import json
from typing import Any

from sglang_fair.edge.trust import TOKEN_HEADER, GatewayToken
from sglang_fair.gateway.http1 import Answer, HttpError, Pool, Target, Unconnected, header_lines
from sglang_fair.gateway.wire import loads

GATEWAY_CLIENT = "__gateway__"  # the client the gateway's own calls (discovery, tokenize) are made as


class UpstreamError(OSError):
    """A server could not be reached or did not answer as expected."""


class HttpStatus(UpstreamError):
    """A server answered, with an HTTP status other than 200 (``status``)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Unreachable(UpstreamError):
    """No connection to the server was made: the request was not started there."""


class Upstream:
    """Calls to the servers over one connection :class:`~sglang_fair.gateway.http1.Pool` (created by
    the caller, in its event loop)."""

    def __init__(self, pool: Pool, client_header: str, token: GatewayToken) -> None:
        self.pool, self.client_header, self.token = pool, client_header, token
        self._heads: dict[tuple[str, bytes], tuple[Target, bytes]] = {}  # (url + path, method): parsed once

    def head(self, url: str, path: str, method: bytes, client: str) -> tuple[Target, bytes]:
        """The target of ``url + path`` and the head of a call made there for ``client``."""
        whole = url + path
        known = self._heads.get((whole, method))
        if known is None:
            fixed = {"content-type": "application/json"} if method == b"POST" else {}
            if self.token.enabled:
                fixed[TOKEN_HEADER] = self.token.token
            target = Target(whole)
            known = self._heads[whole, method] = target, target.head(method, header_lines(fixed))
        return known[0], known[1] + header_lines({self.client_header: client})

    async def get_json(self, url: str, path: str) -> Any:
        """``GET url+path`` as the gateway; the JSON answer."""
        try:
            resp = await self.pool.request(*self.head(url, path, b"GET", GATEWAY_CLIENT))
            return await _json(resp, url + path)
        except (HttpError, TimeoutError) as err:
            raise UpstreamError(f"{url}{path}: {err or type(err).__name__}") from None

    async def post_json(self, url: str, path: str, body: bytes | dict[str, Any],
                        timeout: float | None = None) -> Any:
        """``POST url+path`` with a JSON body (a value, or its bytes), as the gateway (within ``timeout``
        s if given); the JSON answer."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            resp = await self.pool.request(*self.head(url, path, b"POST", GATEWAY_CLIENT), data,
                                           total=timeout or None)
            return await _json(resp, url + path)
        except (HttpError, TimeoutError) as err:
            raise UpstreamError(f"{url}{path}: {err or type(err).__name__}") from None

    async def send(self, url: str, path: str, body: bytes, client: str) -> Answer:
        """``POST url+path`` for ``client``; the open answer (the caller reads and releases it)."""
        try:
            return await self.pool.request(*self.head(url, path, b"POST", client), body)
        except Unconnected as err:
            raise Unreachable(f"{url}{path}: {err}") from None
        except (HttpError, TimeoutError) as err:
            raise UpstreamError(f"{url}{path}: {err or type(err).__name__}") from None

    async def healthy(self, url: str, timeout: float) -> bool:
        """Whether ``GET url/health`` answers 200 within ``timeout`` seconds."""
        try:
            resp = await self.pool.request(*self.head(url, "/health", b"GET", GATEWAY_CLIENT), total=timeout)
            await resp.whole()
            return resp.status == 200
        except (HttpError, TimeoutError):
            return False


async def _json(resp: Answer, where: str) -> Any:
    data = await resp.whole()
    if resp.status != 200:
        text = data[:400].decode(resp.get_encoding(), errors="replace")
        raise HttpStatus(f"{where}: HTTP {resp.status}: {text[:200]}", resp.status)
    try:
        return loads(data)
    except ValueError:
        raise UpstreamError(f"{where}: the answer is not JSON") from None


def make_pool(timeout: float, connect_timeout: float = 30.0) -> Pool:
    """Connections to the servers: ``timeout`` seconds of silence per read (no total limit: a stream
    lasts as long as it lasts), ``connect_timeout`` to connect (a server that does not connect in time
    did not start the request), no connection cap (the servers bound their own queues)."""
    return Pool(connect=min(timeout, connect_timeout), read=timeout)
