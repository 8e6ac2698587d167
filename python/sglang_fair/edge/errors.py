"""How the edge answers a refusal: one OpenAI-style error body, for ``serve``'s middlewares and the
gateway alike."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sglang_fair.edge.asgi import Send

Headers = list[tuple[bytes, bytes]]


def error_body(status: int, kind: str, message: str, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-style error body, the fields of SGLang's own ``ErrorResponse``: ``object``, ``message``,
    ``type``, ``param`` (only when one field of the request is at fault) and ``code`` (the status);
    ``serve``'s edge and the gateway answer with it."""
    body: dict[str, Any] = {"object": "error", "message": message, "type": kind}
    if param is not None:
        body["param"] = param
    return {**body, "code": status}


async def send_json(send: Send, status: int, body: Mapping[str, Any], extra: Headers | None = None) -> None:
    """Answer ``status`` with the JSON ``body`` (``extra``: more response headers)."""
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"), *(extra or [])],
    })
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


async def send_error(send: Send, status: int, kind: str, reason: str, extra: Headers | None = None) -> None:
    """Answer with :func:`error_body` (``extra``: more response headers)."""
    await send_json(send, status, error_body(status, kind, reason), extra)
