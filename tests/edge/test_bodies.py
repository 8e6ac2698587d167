"""A JSON endpoint's body that is not a JSON object gets the edge's short 400 (``edge/bodies.py``), at
``serve`` as at the gateway, instead of SGLang's Python exception with its file path and line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from sglang_fair.edge.bodies import NOT_JSON, NOT_OBJECT, JsonBodyMiddleware, body_problem
from sglang_fair.edge.identity import ClientIdentityMiddleware
from sglang_fair.edge.keys import KeyTable

Sent = list[MutableMapping[str, Any]]


def call(app: Any, path: str, body: bytes, method: str = "POST") -> Sent:
    sent: Sent = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": path, "method": method, "headers": [], "client": ("10.0.0.1", 5)}
    asyncio.run(app(scope, receive, send))
    return sent


def stack(app_seen: dict[str, Any]) -> Any:
    async def inner(scope: Any, receive: Any, send: Any) -> None:
        app_seen["body"] = (await receive())["body"]

    identity = ClientIdentityMiddleware(inner, KeyTable(), "X-Client-Id", lambda: False)  # reads `user`
    return JsonBodyMiddleware(identity)


@pytest.mark.parametrize(("body", "message"), [
    (b'{"model": "default", "messages": [', NOT_JSON), (b"hello", NOT_JSON), (b"\xff\xfe", NOT_JSON),
    (b"", NOT_JSON), (b"[1, 2]", NOT_OBJECT), (b"null", NOT_OBJECT), (b'"text"', NOT_OBJECT),
])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/generate", "/v1/completions"])
def test_a_body_that_is_not_a_json_object_gets_400_with_a_short_message(body: bytes, message: str,
                                                                         path: str) -> None:
    seen: dict[str, Any] = {}
    sent = call(stack(seen), path, body)
    assert sent[0]["status"] == 400 and not seen
    error = json.loads(sent[1]["body"])
    assert error == {"object": "error", "message": message, "type": "BadRequest", "code": 400}


def test_a_json_object_passes_whole_and_other_routes_are_left_alone() -> None:
    seen: dict[str, Any] = {}
    good = b'{"model": "default", "prompt": "a", "user": "carol"}'
    assert call(stack(seen), "/v1/completions", good) == [] and seen["body"] == good
    for path, method in (("/flush_cache", "POST"), ("/v1/responses", "POST"), ("/generate", "GET")):
        seen.clear()
        assert call(stack(seen), path, b"not json", method) == [] and seen["body"] == b"not json"


def test_the_gateway_and_serve_share_the_rule() -> None:
    assert body_problem(b"{}", {}) is None
    assert body_problem(b"[]", []) == NOT_OBJECT and body_problem(b"{", None) == NOT_JSON
