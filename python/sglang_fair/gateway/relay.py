"""One response on its way back from a server: a relayed stream, the body sent with the rank pinned.

:class:`Relay` passes a server's stream through chunk by chunk, counting the output tokens for the
policy's finish; :class:`RelayedStream` is the client's side of it, closing the relay however the
stream ends. A cut stream ends with an OpenAI-style error event instead of ``[DONE]``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from sglang_fair.edge.trust import PIN_FIELDS
from sglang_fair.gateway.http1 import Answer, HttpError
from sglang_fair.gateway.routing import GatewayRouter, Ticket
from sglang_fair.gateway.usage import StreamCounter
from sglang_fair.gateway.wire import with_pin

logger = logging.getLogger("sglang_fair.gateway")


def where(ticket: Ticket) -> str:
    return f"worker {ticket.worker.index} ({ticket.worker.server.url})"


class Relay:
    """One streamed response on its way from a server to a client. :meth:`close` (idempotent) ends it:
    the server's connection is released (dropped when the stream did not end, so the server aborts the
    request) and the policy hears the finish with the output tokens relayed. :meth:`cut` ends it
    early with an error event (the server was taken out)."""

    def __init__(self, resp: Answer, ticket: Ticket, router: GatewayRouter,
                 registry: set[Relay], heard: Callable[[], object] = lambda: None) -> None:
        self.resp, self.ticket, self.router, self.registry, self.heard = resp, ticket, router, registry, heard
        self.counter = StreamCounter()
        self.complete = self.closed = False
        self.cut_reason = ""
        registry.add(self)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The server's bytes, each as soon as it arrives."""
        try:
            async for chunk in self.resp.iter_any():
                self.heard()
                self.counter.feed(chunk)
                yield chunk
            self.complete = True
        except (HttpError, TimeoutError) as err:
            logger.warning("worker %d broke off a stream: %s", self.ticket.worker.index, err)
            why = self.cut_reason or f"worker {self.ticket.worker.index} broke off: {err}"
            yield b"data: " + json.dumps({"error": {"message": why, "type": "ServiceUnavailable",
                                                    "code": 503}}).encode() + b"\n\n"
        finally:
            self.close()

    def cut(self, why: str) -> None:
        self.cut_reason = f"{where(self.ticket)} was taken out: {why}"
        self.resp.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.registry.discard(self)
        if self.complete:
            self.resp.release()
        else:
            self.resp.close()
        self.router.finish(self.ticket, self.counter.tokens)


class RelayedStream(StreamingResponse):
    """A streaming response that closes its :class:`Relay` however it ends (also when the client left
    before the first chunk, when the relay's generator never ran)."""

    def __init__(self, relay: Relay) -> None:
        super().__init__(relay.chunks(), status_code=200,
                         media_type=relay.resp.headers.get("content-type", "text/event-stream"))
        self.relay = relay

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.relay.close()


def pinned(raw: bytes, body: dict[str, Any], ticket: Ticket) -> bytes:
    """The body (``raw``, parsed: ``body``) as sent to the ticket's server: the client's pins dropped,
    the gateway's rank pinned."""
    rank = ticket.worker.pinned_rank()
    return with_pin(raw, body, PIN_FIELDS, None if rank is None else ("routed_dp_rank", rank))


