"""Limits at the HTTP edge that hold for every request, whoever sends it.

- Body size (``--max-body-bytes``, 16 MiB by default): a body declared larger (``Content-Length``) is
  answered 413 before it is read; a chunked body is read up to the limit, then answered 413. uvicorn
  and SGLang 0.5.23 have no limit: a huge body was read into memory and tokenized before anything
  refused it. 16 MiB holds a prompt of about a million tokens as text or as token ids.
- ``Retry-After`` on every 429 that has none: the per-client bounds inside the schedulers and the
  router answer through SGLang's own error path, which sets no header.
"""

from __future__ import annotations

from sglang_fair.edge.asgi import ASGIApp, Message, Receive, Scope, Send
from sglang_fair.edge.errors import send_error

RETRY_AFTER = (b"retry-after", b"1")
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class EdgeLimitsMiddleware:
    """ASGI middleware: 413 for a body over ``max_body_bytes`` (0: no limit), ``Retry-After`` on 429."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        if self.max_body_bytes and scope.get("method") in WITH_BODY:
            declared = dict(scope.get("headers", [])).get(b"content-length")
            if declared is not None:
                if not declared.isdigit() or int(declared) > self.max_body_bytes:
                    await self._too_large(send)
                    return
            else:
                replay = await self._read_bounded(receive)
                if replay is None:
                    await self._too_large(send)
                    return
                receive = replay
        await self.app(scope, receive, _with_retry_after(send))

    async def _too_large(self, send: Send) -> None:
        await send_error(send, 413, "RequestTooLarge",
                         f"the request body is over {self.max_body_bytes} bytes (--max-body-bytes)")

    async def _read_bounded(self, receive: Receive) -> Receive | None:
        """A chunked body: read it up to the limit; a ``receive`` replaying it, None if too large."""
        messages: list[Message] = []
        size, more = 0, True
        while more:
            message = await receive()
            messages.append(message)
            if message.get("type") != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return None
            more = bool(message.get("more_body"))

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        return replay


def _with_retry_after(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message.get("type") == "http.response.start" and message.get("status") == 429:
            headers = list(message.get("headers", []))
            if not any(k.lower() == RETRY_AFTER[0] for k, _ in headers):
                message = {**message, "headers": [*headers, RETRY_AFTER]}
        await send(message)

    return sending
