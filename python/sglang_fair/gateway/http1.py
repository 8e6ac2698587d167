"""The gateway's HTTP/1.1 client to its servers: kept-alive connections on the event loop, no more.

aiohttp's client was half of the gateway's CPU at saturation (``sglang-fair lab gateway-speed
--profile``: two calls a chat, ``/tokenize`` and the relay, each through its session, request and
response objects, timers and payload writers). :class:`Pool` does what those calls need: ``GET`` and
``POST`` with a body already serialised, the answer's status and headers, its body whole
(:meth:`Answer.read`) or as it arrives (:meth:`Answer.iter_any`, chunked or not), a connection kept
for the next call once an answer was read to its end. The timeouts are aiohttp's as the gateway set
them: ``connect`` s to connect, ``read`` s of silence while an answer is awaited or read, or instead a
total deadline for the whole call. What goes wrong raises an :class:`HttpError`: :class:`Unconnected`
when no connection was made (the request did not reach the server), else :class:`BrokenOff`
(:class:`ReadTimeout` for silence). Every URL's scheme, host and port are the servers' (``http`` or
``https``); a URL's path is kept as a prefix. One connection and the answer read from it:
``http1_answer.py``.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from typing import Any
from urllib.parse import urlsplit

from sglang_fair.gateway.dns import Resolver
from sglang_fair.gateway.http1_answer import (
    MAX_HEAD,
    PAUSE_AT,
    Answer,
    BrokenOff,
    Connection,
    HttpError,
    ReadTimeout,
    Unconnected,
    parse_head,
)

__all__ = ["PAUSE_AT", "Answer", "BrokenOff", "HttpError", "Pool", "ReadTimeout", "Target", "Unconnected",
           "header_lines"]
KEEP_IDLE_S = 15.0  # a connection idle longer is closed, not reused (aiohttp's keepalive_timeout)
FORBIDDEN = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # in a header (RFC 9110 5.5; aiohttp refuses them)


class Target:
    """One URL, parsed once: the pool's key, the request line's path, the ``Host`` header."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r}: not an http(s) URL")
        self.https = parts.scheme == "https"
        self.key = (parts.hostname, parts.port or (443 if self.https else 80), self.https)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.url, self.path, self.host = url, path, parts.netloc.encode("idna")

    def head(self, method: bytes, headers: bytes) -> bytes:
        """The request's head up to the body's length (``headers``: ``name: value\\r\\n`` lines)."""
        return b"%s %s HTTP/1.1\r\nHost: %s\r\n%s" % (method, self.path.encode(), self.host, headers)

def header_lines(headers: dict[str, str]) -> bytes:
    """``headers`` as request header lines (UTF-8; a control character raises ``ValueError``, as aiohttp)."""
    lines = []
    for name, value in headers.items():
        if FORBIDDEN.search(name) or FORBIDDEN.search(value):
            raise ValueError("Forbidden control character detected in headers. "
                             "Potential header injection attack.")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode()

class Pool:
    """Kept-alive connections per server (created in the event loop that uses them; :meth:`close` at the
    end). ``connect``: seconds to connect; ``read``: seconds of silence allowed in an answer."""

    def __init__(self, connect: float, read: float | None) -> None:
        self.connect_s, self.read_s = connect, read
        self.idle: dict[Any, list[Connection]] = {}
        self.resolver = Resolver()
        self._tls: ssl.SSLContext | None = None

    async def __aenter__(self) -> Pool:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for conns in self.idle.values():
            for conn in conns:
                conn.close()
        self.idle.clear()

    def put(self, conn: Connection) -> None:
        """Keep ``conn`` for the next call to its server (unless it ended)."""
        if not conn.ended:
            conn.idle_since = asyncio.get_running_loop().time()
            self.idle.setdefault(conn.key, []).append(conn)

    async def request(self, target: Target, head: bytes, body: bytes = b"",
                      total: float | None = None) -> Answer:
        """Send ``head`` (:meth:`Target.head`) and ``body``; the answer once its headers are in. With
        ``total``: the whole call, the answer's body included, within ``total`` s instead of the
        pool's timeouts."""
        loop = asyncio.get_running_loop()
        deadline = None if total is None else loop.time() + total
        conn = await self._connection(target, total)
        conn.transport.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))  # type: ignore[union-attr]
        read = None if total is not None else self.read_s
        try:
            while True:
                end = conn.buf.find(b"\r\n\r\n")
                if end >= 0:
                    parsed = parse_head(conn.taken(end + 4))
                    status = parsed[0]
                    if 100 <= status < 200 and status != 101:
                        continue  # an interim answer (100 Continue): the real one follows
                    no_body = status in (204, 304, 101) or head.startswith(b"HEAD ")
                    return Answer(self.put, conn, parsed, read, deadline, no_body)
                if len(conn.buf) > MAX_HEAD:
                    raise BrokenOff(f"the answer's head is over {MAX_HEAD} bytes")
                await conn.more(read, deadline)
        except BaseException:
            conn.close()
            raise

    async def _connection(self, target: Target, total: float | None) -> Connection:
        loop = asyncio.get_running_loop()
        idle, now = self.idle.get(target.key), loop.time()
        while idle:
            conn = idle.pop()
            if not conn.ended and not conn.buf and now - conn.idle_since < KEEP_IDLE_S:
                return conn
            conn.close()
        host, port, https = target.key
        within = self.connect_s if total is None else min(self.connect_s, total)
        if https and self._tls is None:
            self._tls = ssl.create_default_context()
        try:
            conn = await asyncio.wait_for(self._connect(host, port, https), within)
        except TimeoutError:
            raise Unconnected(f"{target.url}: no connection within {within:g} s") from None
        except OSError as err:
            raise Unconnected(f"cannot connect to {host}:{port}: {err}") from None
        conn.key = target.key
        return conn

    async def _connect(self, host: str, port: int, https: bool) -> Connection:
        """A new connection to ``host``'s first address that takes one (its name looked up by the
        pool's :class:`~sglang_fair.gateway.dns.Resolver`)."""
        loop = asyncio.get_running_loop()
        failure: OSError = OSError(f"{host}: no address")
        for family, address in await self.resolver.addresses(host, port):
            try:
                _, conn = await loop.create_connection(
                    Connection, address, port, family=family, ssl=self._tls if https else None,
                    server_hostname=host if https else None)
                return conn
            except OSError as err:
                failure = err
        raise failure
