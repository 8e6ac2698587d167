"""Client identity rules, the key file and the ASGI middleware (no SGLang needed)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.identity import ClientIdentityMiddleware, Unauthorized, resolve_client
from sglang_fair.edge.keys import KeyTable, load_key_file, parse_key_lines

KEYS = parse_key_lines(["# comment", "", "k-alice alice 2", "k-bob bob"], "keys.txt")
NO_KEYS = KeyTable()


def test_precedence_without_keys() -> None:
    assert resolve_client({"x-client-id": "h"}, "u", NO_KEYS, "X-Client-Id") == "h"
    assert resolve_client({}, "u", NO_KEYS, "X-Client-Id") == "u"
    assert resolve_client({}, None, NO_KEYS, "X-Client-Id") == "default"
    assert resolve_client({"x-tenant": "t"}, None, NO_KEYS, "X-Tenant") == "t"


def test_keys_decide_and_header_cannot_override() -> None:
    headers = {"authorization": "Bearer k-bob", "x-client-id": "alice"}
    assert resolve_client(headers, "alice", KEYS, "X-Client-Id") == "bob"
    assert KEYS.weights == {"alice": 2.0}
    with pytest.raises(Unauthorized):
        resolve_client({"x-client-id": "alice"}, None, KEYS, "X-Client-Id")
    with pytest.raises(Unauthorized):
        resolve_client({"authorization": "Bearer nope"}, None, KEYS, "X-Client-Id")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["k1 a", "k2"], "keys.txt:2: expected 'API_KEY CLIENT [WEIGHT]'"),
        (["k1 a x"], "keys.txt:1: weight 'x' is not a number"),
        (["k1 a 0"], "keys.txt:1: weight must be > 0"),
        (["k1 a", "k1 b"], "keys.txt:2: key for 'b' already used"),
        (["k1 a 1", "k2 a 2"], "keys.txt:2: client 'a' already has weight"),
        (["# only a comment"], "keys.txt: no keys"),
    ],
)
def test_malformed_key_file_names_the_line(lines: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_key_lines(lines, "keys.txt")


def test_unreadable_key_file(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_key_file(str(tmp_path / "missing.txt"))


def make_middleware(keys: KeyTable) -> tuple[ClientIdentityMiddleware, dict[str, Any]]:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["client"] = scope["state"]["sglang_fair_client"]
        seen["body"] = (await receive())["body"]

    return ClientIdentityMiddleware(app, keys, "X-Client-Id", lambda: False), seen


def call(
    mw: ClientIdentityMiddleware, headers: dict[str, str], body: bytes
) -> list[MutableMapping[str, Any]]:
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "path": "/v1/chat/completions", "method": "POST", "client": ("10.0.0.1", 5),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(mw(scope, receive, send))
    return sent


def test_middleware_reads_openai_user_and_replays_body() -> None:
    mw, seen = make_middleware(NO_KEYS)
    body = json.dumps({"model": "m", "user": "carol"}).encode()
    call(mw, {}, body)
    assert seen == {"client": "carol", "body": body}
    call(mw, {"X-Client-Id": "dave"}, body)
    assert seen["client"] == "dave"


def test_middleware_answers_401_without_a_valid_key() -> None:
    mw, seen = make_middleware(KEYS)
    assert call(mw, {"X-Client-Id": "alice"}, b"{}")[0]["status"] == 401
    assert call(mw, {"Authorization": "Bearer wrong"}, b"{}")[0]["status"] == 401
    assert not seen
    assert call(mw, {"Authorization": "Bearer k-alice", "X-Client-Id": "bob"}, b"{}") == []
    assert seen["client"] == "alice"
