"""One connection of the gateway's HTTP/1.1 client (:mod:`sglang_fair.gateway.http1`) and the answer read
from it: the bytes as they arrive, the answer's head, its body framed by length, by chunks or by the
connection's end, and the errors a call raises.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncIterator, Callable
from typing import Any

MAX_HEAD = 64 * 1024  # an answer's status line and headers
PAUSE_AT, RESUME_AT = 256 * 1024, 64 * 1024  # unread bytes of a stream: stop, then resume reading


class HttpError(OSError):
    """A call to a server failed."""


class Unconnected(HttpError):
    """No connection to the server was made (refused, unresolved, not within the connect timeout)."""


class BrokenOff(HttpError):
    """The connection failed, closed or broke the protocol before the answer's end."""


class ReadTimeout(BrokenOff, TimeoutError):
    """The server was silent longer than the read timeout, or the call's deadline passed."""

class Connection(asyncio.Protocol):
    """One TCP connection to a server: what arrived and not yet read, and whether it ended."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.ended = False  # the server closed its side, the connection was lost or closed here
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.idle_since = 0.0
        self.key: Any = None  # the pool's key of its server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > PAUSE_AT and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def close(self) -> None:
        self.ended = True
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def taken(self, n: int) -> bytes:
        """The first ``n`` unread bytes, consumed."""
        out = bytes(self.buf[:n])
        del self.buf[:n]
        if self.paused and len(self.buf) < RESUME_AT and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return out

    async def more(self, read: float | None, deadline: float | None) -> None:
        """Wait until more bytes arrive or the connection ends (:class:`ReadTimeout` after ``read`` s of
        silence or at ``deadline``, the loop's time)."""
        if self.ended:
            raise BrokenOff("the server closed the connection before the answer's end")
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        if self.paused and self.transport is not None:  # waiting for more: read again
            self.paused = False
            self.transport.resume_reading()
        wait = read
        if deadline is not None:
            wait = deadline - loop.time() if read is None else min(read, deadline - loop.time())
        timer = loop.call_later(wait, _timed_out, waiter) if wait is not None else None
        try:
            await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()


def _timed_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout("the server was silent past the timeout"))

class Answer:
    """A server's answer: ``status``, ``headers`` (names lower-cased; a repeated one's values joined by
    ``, ``) and the body, read once, whole or as it arrives; then :meth:`release` (its connection handed
    to ``keep`` if it can serve another call) or :meth:`close`."""

    def __init__(self, keep: Callable[[Connection], None], conn: Connection,
                 head: tuple[int, dict[str, str], bool], read: float | None, deadline: float | None,
                 no_body: bool) -> None:
        self.keep, self.conn = keep, conn
        self.status, self.headers, self.reusable = head
        self.read_s, self.deadline = read, deadline
        self.left = 0 if no_body else -1  # bytes of the body (or of its current chunk) still to read
        self.chunked = not no_body and "chunked" in self.headers.get("transfer-encoding", "").lower()
        if not no_body and not self.chunked:
            length = self.headers.get("content-length")
            if length is not None and length.strip().isdigit():
                self.left = int(length)
            else:  # the body ends with the connection
                self.reusable = False
        self.done = self.left == 0
        self.closed = False

    def get_encoding(self) -> str:
        """The charset of the answer's content type (UTF-8 if none, or one Python does not know)."""
        for part in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = part.strip().partition("=")
            if name.lower() == "charset" and value:
                try:
                    return codecs.lookup(value.strip('"')).name
                except LookupError:
                    break
        return "utf-8"

    async def read(self) -> bytes:
        """The whole body."""
        if 0 <= self.left <= PAUSE_AT and not self.chunked:  # the usual case: taken in one piece
            try:
                while len(self.conn.buf) < self.left:
                    await self.conn.more(self.read_s, self.deadline)
            except BaseException:
                self.close()
                raise
            self.done = True
            return self.conn.taken(self.left)
        return b"".join([piece async for piece in self.iter_any()])

    async def whole(self) -> bytes:
        """The whole body, then :meth:`release` (also when reading it fails)."""
        try:
            return await self.read()
        finally:
            self.release()

    async def iter_any(self) -> AsyncIterator[bytes]:
        """The body's bytes, each piece as soon as it arrives (chunked transfer decoded)."""
        conn = self.conn
        try:
            while not self.done:
                piece = self._step()
                if piece:
                    yield piece
                elif not self.done:
                    if conn.ended and self.left < 0 and not self.chunked:
                        self.done = True
                    else:
                        await conn.more(self.read_s, self.deadline)
        except BaseException:
            self.close()
            raise

    def _step(self) -> bytes:
        """What the bytes arrived so far give of the body ('' if nothing yet); sets :attr:`done`."""
        conn = self.conn
        if not self.chunked:
            if self.left < 0:
                return conn.taken(len(conn.buf))
            piece = conn.taken(min(self.left, len(conn.buf)))
            self.left -= len(piece)
            self.done = self.left == 0
            return piece
        out = []
        while True:
            if self.left > 0:
                piece = conn.taken(min(self.left, len(conn.buf)))
                self.left -= len(piece)
                out.append(piece)
                if self.left:
                    break
                self.left = -2  # the CRLF after a chunk's data
            end = conn.buf.find(b"\r\n")
            if end < 0:
                if len(conn.buf) > MAX_HEAD:
                    raise BrokenOff("a chunk's size line is too long")
                break
            line = conn.taken(end + 2)[:-2]
            if self.left == -2:
                if line:
                    raise BrokenOff("a chunk does not end with CRLF")
                self.left = -1
            elif self.left == -1:
                try:
                    self.left = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise BrokenOff(f"a chunk's size is not hexadecimal: {line[:40]!r}") from None
                if self.left == 0:
                    self.left = -3  # the trailer section, up to an empty line
            elif not line:  # the end of the trailer section
                self.left, self.done = 0, True
                break
        return b"".join(out)

    def release(self) -> None:
        """Done with the answer: its connection kept for another call if the body was read to its end."""
        if self.closed:
            return
        self.closed = True
        if self.done and self.reusable and not self.conn.buf:
            self.keep(self.conn)
        else:
            self.conn.close()

    def close(self) -> None:
        """Done with the answer, its connection closed (a request the server still serves is aborted)."""
        self.closed = True
        self.conn.close()

def parse_head(raw: bytes) -> tuple[int, dict[str, str], bool]:
    """The status, headers and whether the connection stays open after the answer, of an answer's head
    (``raw``, ending with an empty line)."""
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise BrokenOff(f"not an HTTP/1 answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, colon, value = line.partition(":")
            if not colon:
                raise BrokenOff(f"a header line without a colon: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
    connection = headers.get("connection", "").lower()
    keep = "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
    return int(code), headers, keep
