"""A bound on one client's requests in flight at ``serve``'s edge (``--client-max-inflight``): the next
POST of a client at the bound gets 429 with ``Retry-After`` before it reaches SGLang. The gateway keeps
the same bound in its router (``routing/clients.py``), where it counts what it routed."""

from __future__ import annotations

from sglang_fair.edge.asgi import ASGIApp, Message, Receive, Scope, Send
from sglang_fair.edge.errors import send_error
from sglang_fair.edge.identity import WARMUP_CLIENT, client_in


class ClientInflightMiddleware:
    """ASGI middleware, inside the identity middleware: a client with ``max_inflight`` (> 0) POST
    requests in flight gets 429 for the next one; a request holds its slot until its answer's last byte
    is sent."""

    def __init__(self, app: ASGIApp, max_inflight: int) -> None:
        self.app, self.max_inflight = app, max_inflight
        self.inflight: dict[str, int] = {}  # client -> POST requests in flight (only while > 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = client_in(scope)
        if (self.max_inflight <= 0 or client is None or client == WARMUP_CLIENT
                or scope.get("method") != "POST"):
            await self.app(scope, receive, send)
            return
        held = self.inflight.get(client, 0)
        if held >= self.max_inflight:
            reason = f"client {client!r} already has {held} requests in flight (the limit); retry later"
            await send_error(send, 429, "TooManyRequests", reason, [(b"retry-after", b"1")])
            return
        await self._in_flight(client, scope, receive, send)

    async def _in_flight(self, client: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request holding one of ``client``'s slots until its answer's last byte is sent (SGLang's
        streams then run a 2 s abort task before the app returns: the slot is not held for it)."""
        self.inflight[client] = self.inflight.get(client, 0) + 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                left = self.inflight[client] - 1
                if left:
                    self.inflight[client] = left
                else:
                    del self.inflight[client]

        async def send_then_release(message: Message) -> None:
            await send(message)
            if message.get("type") == "http.response.body" and not message.get("more_body"):
                release()

        try:
            await self.app(scope, receive, send_then_release)
        finally:
            release()
