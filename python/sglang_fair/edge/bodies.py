"""A JSON endpoint's body must be a JSON object: 400 with the edge's error body otherwise.

SGLang 0.5.23 answers a malformed body on ``/generate`` or the OpenAI endpoints with a 400 whose message
is a Python exception, file path and line included. ``serve`` (:class:`JsonBodyMiddleware`) and the
gateway (``gateway/intake.py``, through :func:`body_problem`) answer the same short message instead.
``/v1/responses`` and ``/v1/messages`` keep SGLang's own answers (their error envelopes differ).
"""

from __future__ import annotations

from sglang_fair.edge.asgi import ASGIApp, Receive, Scope, Send, buffer_body, json_body
from sglang_fair.edge.errors import send_error
from sglang_fair.edge.model_names import MODEL_PATHS

JSON_PATHS = MODEL_PATHS | frozenset({"/generate", "/encode", "/classify", "/v1/rerank", "/v1/score",
                                      "/tokenize", "/detokenize"})
NOT_JSON = "the request body is not JSON"
NOT_OBJECT = "the request body must be a JSON object"


def body_problem(raw: bytes, parsed: object) -> str | None:
    """Why the body ``raw`` (``parsed``: its JSON, None if it is not JSON) cannot be a request, or None."""
    if parsed is None:
        return NOT_OBJECT if raw.strip() == b"null" else NOT_JSON
    return None if isinstance(parsed, dict) else NOT_OBJECT


class JsonBodyMiddleware:
    """ASGI middleware: 400 (:func:`body_problem`) for a POST to :data:`JSON_PATHS` whose body is not a
    JSON object; the body is read and parsed once with the other middlewares (``asgi.json_body``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST" and scope.get("path") in JSON_PATHS:
            parsed, receive = await json_body(scope, receive)
            raw, receive = await buffer_body(receive, scope)
            if (problem := body_problem(raw, parsed)) is not None:
                await send_error(send, 400, "BadRequest", problem)
                return
        await self.app(scope, receive, send)
