"""Per-client counts of the answers an HTTP edge gave: requests, 429s and errors.

:class:`StatusMiddleware` wraps ``serve``'s app (outside the identity middleware) and the gateway's: it
reads the status of every answer as it starts, and the client the edge decided, which the identity
middleware (``serve``) or the gateway's relay leaves in the request scope's state under ``SCOPE_KEY``.
Answers refused before a client was known (401) count under :data:`NO_CLIENT`. Counted: POST requests
(the model's endpoints; not ``/tokenize`` and ``/detokenize``, which the gateway calls for every request it
routes); an error inside a stream that began with 200 (an error event) is not an
HTTP status and is not counted here. The book keeps at most ``max_clients`` clients by name, the rest
under :data:`OTHER`, so it stays bounded whatever names clients send.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.edge.asgi import ASGIApp, Message, Receive, Scope, Send
from sglang_fair.edge.identity import SCOPE_KEY

NO_CLIENT = "(no client)"
NOT_COUNTED = frozenset({"/tokenize", "/detokenize"})
OTHER = "__other__"
MAX_CLIENTS = 1024



@dataclass
class Counts:
    requests: int = 0
    refused: int = 0  # 429: over a per-client bound
    client_errors: int = 0  # other 4xx (401, 404, 413, ...)
    server_errors: int = 0  # 5xx (503: taken out, overloaded)

    def view(self) -> dict[str, int]:
        return {"requests": self.requests, "refused": self.refused, "client_errors": self.client_errors,
                "server_errors": self.server_errors}


@dataclass
class StatusBook:
    """Answers per client since the process started."""

    max_clients: int = MAX_CLIENTS
    clients: dict[str, Counts] = field(default_factory=dict)

    def count(self, client: str | None, status: int) -> None:
        name = client or NO_CLIENT
        if name not in self.clients and len(self.clients) >= self.max_clients:
            name = OTHER
        counts = self.clients.setdefault(name, Counts())
        counts.requests += 1
        if status == 429:
            counts.refused += 1
        elif 400 <= status < 500:
            counts.client_errors += 1
        elif status >= 500:
            counts.server_errors += 1

    def view(self) -> dict[str, dict[str, int]]:
        return {c: counts.view() for c, counts in self.clients.items()}


class StatusMiddleware:
    """ASGI middleware: counts each POST answer's status in ``book`` under the request's client."""

    def __init__(self, app: ASGIApp, book: StatusBook) -> None:
        self.app, self.book = app, book

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") in NOT_COUNTED:
            await self.app(scope, receive, send)
            return

        async def counting(message: Message) -> None:
            if message.get("type") == "http.response.start":
                state = scope.get("state") or {}
                self.book.count(state.get(SCOPE_KEY), int(message.get("status", 0)))
            await send(message)

        await self.app(scope, receive, counting)
