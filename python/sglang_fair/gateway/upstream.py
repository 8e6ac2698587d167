"""The gateway's one HTTP boundary to the servers (aiohttp, as SGLang's own clients use).

Every request carries the gateway's token (``--gateway-token-file``; the server then accepts its
pinned rank and the client it names) and the client in the identity header. Failures to reach a
server, or an answer that is not a 200 JSON object where one is needed, raise :class:`UpstreamError`
(:class:`Unreachable` when no connection was made, so the request was not started there).
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from yarl import URL

from sglang_fair.edge.trust import TOKEN_HEADER, GatewayToken
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
    """Calls to the servers over one ``aiohttp`` session (created by the caller, in its event loop)."""

    def __init__(self, session: aiohttp.ClientSession, client_header: str, token: GatewayToken) -> None:
        self.session, self.client_header, self.token = session, client_header, token
        self._urls: dict[str, URL] = {}  # url + path, parsed once
        self._limits: dict[float, aiohttp.ClientTimeout] = {}

    def url(self, url: str, path: str) -> URL:
        """``url + path``, parsed once (yarl's parsing is a visible share of a relay's CPU)."""
        whole = url + path
        parsed = self._urls.get(whole)
        if parsed is None:
            parsed = self._urls[whole] = URL(whole)
        return parsed

    def limit(self, timeout: float | None) -> aiohttp.ClientTimeout:
        if not timeout:
            return self.session.timeout
        if timeout not in self._limits:
            self._limits[timeout] = aiohttp.ClientTimeout(total=timeout)
        return self._limits[timeout]

    def headers(self, client: str) -> dict[str, str]:
        """The headers of a call made for ``client``."""
        headers = {"content-type": "application/json", self.client_header: client}
        if self.token.enabled:
            headers[TOKEN_HEADER] = self.token.token
        return headers

    async def get_json(self, url: str, path: str) -> Any:
        """``GET url+path`` as the gateway; the JSON answer."""
        try:
            async with self.session.get(url + path, headers=self.headers(GATEWAY_CLIENT)) as resp:
                return await _json(resp, url + path)
        except (aiohttp.ClientError, TimeoutError) as err:
            raise UpstreamError(f"{url}{path}: {err or type(err).__name__}") from None

    async def post_json(self, url: str, path: str, body: bytes | dict[str, Any],
                        timeout: float | None = None) -> Any:
        """``POST url+path`` with a JSON body (a value, or its bytes), as the gateway (within ``timeout``
        s if given); the JSON answer."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            async with self.session.post(self.url(url, path), data=data, timeout=self.limit(timeout),
                                         headers=self.headers(GATEWAY_CLIENT)) as resp:
                return await _json(resp, url + path)
        except (aiohttp.ClientError, TimeoutError) as err:
            raise UpstreamError(f"{url}{path}: {err or type(err).__name__}") from None

    async def send(self, url: str, path: str, body: bytes, client: str) -> aiohttp.ClientResponse:
        """``POST url+path`` for ``client``; the open response (the caller reads and releases it)."""
        try:
            return await self.session.post(self.url(url, path), data=body, headers=self.headers(client))
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as err:
            raise Unreachable(f"{url}{path}: {err or 'no connection within the connect timeout'}") from None
        except (aiohttp.ClientError, TimeoutError) as err:
            raise UpstreamError(f"{url}{path}: {err or type(err).__name__}") from None

    async def healthy(self, url: str, timeout: float) -> bool:
        """Whether ``GET url/health`` answers 200 within ``timeout`` seconds."""
        try:
            async with self.session.get(url + "/health", headers=self.headers(GATEWAY_CLIENT),
                                        timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                return resp.status == 200
        except (aiohttp.ClientError, TimeoutError):
            return False


async def _json(resp: aiohttp.ClientResponse, where: str) -> Any:
    data = await resp.read()
    if resp.status != 200:
        text = data[:400].decode(resp.get_encoding(), errors="replace")
        raise HttpStatus(f"{where}: HTTP {resp.status}: {text[:200]}", resp.status)
    try:
        return loads(data)
    except ValueError:
        raise UpstreamError(f"{where}: the answer is not JSON") from None


def make_session(timeout: float, connect_timeout: float = 30.0) -> aiohttp.ClientSession:
    """A session for the servers: no total limit (a stream lasts as long as it lasts), ``timeout``
    seconds of silence per read, ``connect_timeout`` to connect (a server that does not connect in
    time did not start the request), no connection cap (the servers bound their own queues)."""
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=min(timeout, connect_timeout),
                                      sock_read=timeout),
        connector=aiohttp.TCPConnector(limit=0),
        cookie_jar=aiohttp.DummyCookieJar(),  # the servers set no cookies for the gateway to keep
    )
