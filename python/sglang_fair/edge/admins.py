"""The clients whose keys read every client's figures (``--fairness-admins``): with keys configured,
``/metrics`` and ``/fairness/router`` (they name every client) answer 403 to any other key.
``/fairness`` decides per row itself (an admin reads every row, another key its own)."""

from __future__ import annotations

from sglang_fair.edge.asgi import ASGIApp, Receive, Scope, Send
from sglang_fair.edge.errors import send_error
from sglang_fair.edge.identity import client_in

ADMIN_PATHS = frozenset({"/metrics", "/fairness/router"})


def parse_admins(text: str) -> frozenset[str]:
    """The clients of a comma-separated ``--fairness-admins`` value."""
    return frozenset(c.strip() for c in text.split(",") if c.strip())


class AdminOnlyMiddleware:
    """ASGI middleware, inside the identity middleware (installed only with keys, where it resolves the
    client of every path): 403 at :data:`ADMIN_PATHS` for a client not in ``admins``."""

    def __init__(self, app: ASGIApp, admins: frozenset[str]) -> None:
        self.app, self.admins = app, admins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("path") in ADMIN_PATHS and client_in(scope) not in self.admins:
            await send_error(send, 403, "Forbidden",
                             f"{scope.get('path')} needs a key of a --fairness-admins client")
            return
        await self.app(scope, receive, send)
