"""HTTP stand-ins for the tests: a quiet request handler that answers JSON or text, and servers of it
started on free loopback ports and stopped afterwards."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class StandIn(BaseHTTPRequestHandler):
    """A handler that logs nothing; :meth:`answer` sends a body with its length."""

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self, status: int, body: Any, kind: str = "application/json") -> None:
        """``body``: bytes or text as they are, anything else as JSON."""
        text = body if isinstance(body, bytes | str) else json.dumps(body)
        data = text if isinstance(text, bytes) else text.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def stand_ins() -> Iterator[Callable[[type[BaseHTTPRequestHandler]], str]]:
    """``start(handler_class)`` serves it on a free loopback port and gives its base URL; every server
    started is stopped when the block ends."""
    servers: list[ThreadingHTTPServer] = []

    def start(handler: type[BaseHTTPRequestHandler]) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    try:
        yield start
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
