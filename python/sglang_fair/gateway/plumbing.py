"""The gateway's HTTP server plumbing: uvloop and httptools where installed (the ``gateway`` extra).

uvicorn's pure-Python ``h11`` parser was 15-18% of the gateway's CPU at saturation
(``sglang-fair lab gateway-speed --profile``). uvicorn over ``httptools`` puts no bound on a request's
head, where ``h11`` refuses one that does not fit its buffer (a 200 kB header: 400; the bad-input e2e
test sends one): :class:`BoundedHttpTools` keeps that refusal, with the same 400, and so keeps a client
from making the gateway buffer headers without end. It also sends the answer to a ``POST`` in one
write where uvicorn makes two, its head and its body (:class:`HeadWithBody`): one system call and
one packet fewer per relayed request.
"""

from __future__ import annotations

import importlib.util
from typing import Any

MAX_HEAD_BYTES = 64 * 1024  # a request line and headers; nginx's default buffers hold 32 kB


def fast_plumbing() -> tuple[str, Any]:
    """uvicorn's ``loop`` and ``http`` settings: uvloop and :class:`BoundedHttpTools`, else asyncio's
    loop and ``h11`` (a gateway installed without them still serves); the first names what is used."""
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    if importlib.util.find_spec("httptools") is None:
        return f"{loop}, h11", {"loop": loop, "http": "h11"}
    return f"{loop}, httptools", {"loop": loop, "http": bounded_httptools()}


def bounded_httptools(max_head: int = MAX_HEAD_BYTES) -> type[Any]:
    """uvicorn's httptools protocol refusing (400, connection closed) a head over ``max_head`` bytes."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class BoundedHttpTools(HttpToolsProtocol):
        in_head, head_bytes = False, 0

        def on_message_begin(self) -> None:
            self.in_head, self.head_bytes = True, 0
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self.in_head = False
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and cycle.scope is self.scope and self.scope["method"] == "POST":
                cycle.transport = HeadWithBody(cycle.transport)  # type: ignore[assignment]

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.in_head and not self.transport.is_closing():
                self.head_bytes += len(data)
                if self.head_bytes > max_head:
                    self.in_head = False
                    self.send_400_response("Request header fields too large.")

    return BoundedHttpTools


class HeadWithBody:
    """The transport of one answer (uvicorn's request cycle writes to it): a head that names its
    ``Content-Length`` (a whole answer, whose body uvicorn writes next) is held back and written with
    the next write, or before the connection closes; everything else (a stream's head, ``100
    Continue``) is written at once. Not for ``HEAD`` requests, whose body uvicorn never writes."""

    __slots__ = ("head", "transport")

    def __init__(self, transport: Any) -> None:
        self.transport, self.head = transport, b""

    def write(self, data: bytes) -> None:
        if self.head:
            data, self.head = self.head + data, b""
        elif (data.startswith(b"HTTP/1.1 ") and data.endswith(b"\r\n\r\n") and b"\r\ncontent-length: " in data
              and not data.startswith(b"HTTP/1.1 1")):
            self.head = data
            return
        self.transport.write(data)

    def close(self) -> None:
        if self.head:
            self.write(b"")
        self.transport.close()

    def __getattr__(self, name: str) -> Any:  # is_closing, get_extra_info, ...: the transport's
        return getattr(self.transport, name)
