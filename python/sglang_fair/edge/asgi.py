"""ASGI plumbing of the edge: the types, a request's headers, and its body read once per request.

Several middlewares read the body (the gateway-token check for a pinned rank, the identity's ``user``
field, the model name); :func:`buffer_body` keeps it in the scope's state, so the first reads it and
the others, and the app, get it again.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BODY_KEY, JSON_KEY = "sglang_fair_body", "sglang_fair_json"  # the request body, read once (buffer_body)


def headers_of(scope: Scope) -> dict[str, str]:
    """The request's headers, names lower-cased (the last of a repeated header wins)."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def scope_state(scope: Scope) -> MutableMapping[str, Any]:
    """The request's ``state`` (Starlette's ``request.state``), made if missing."""
    state: MutableMapping[str, Any] = scope.setdefault("state", {})
    return state


def parse_json(body: bytes) -> object:
    """A JSON body, or None if it is not JSON."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


async def buffer_body(receive: Receive, scope: Scope | None = None) -> tuple[bytes, Receive]:
    """Read the whole request body and return it with a ``receive`` that replays it. With ``scope`` the
    body is read once per request: it is kept in the scope's state, and a later call (an inner
    middleware, whose ``receive`` replays it already) gets it back with ``receive`` as it is."""
    state = scope_state(scope) if scope is not None else {}
    if BODY_KEY in state:
        return state[BODY_KEY], receive
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = bool(message.get("more_body"))
    body = state[BODY_KEY] = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay


async def json_body(scope: Scope, receive: Receive) -> tuple[object, Receive]:
    """The request's JSON body (None if it is not JSON), read and parsed once per request
    (:func:`buffer_body`), with a ``receive`` that replays it."""
    body, receive = await buffer_body(receive, scope)
    state = scope_state(scope)
    if JSON_KEY not in state:
        state[JSON_KEY] = parse_json(body)
    return state[JSON_KEY], receive
