"""Only a trusted gateway may pin a data-parallel rank (``gateway_trust.py``), and name its client.

The hole: SGLang's DP controller sends a request carrying ``routed_dp_rank`` (body, alias or header)
straight to that rank, so any client of ``serve --dp-size N`` could pass the fair router. Shown on a
bare app (the pin reaches it), then closed by the middleware (403) and, behind it, the tokenizer hook.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from types import SimpleNamespace
from typing import Any

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.identity import ClientIdentityMiddleware, resolve_client
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.edge.trust import (
    TOKEN_HEADER,
    TRUST_KEY,
    GatewayToken,
    PinnedRankMiddleware,
    load_token_file,
    pinned_rank,
)
from sglang_fair.sglang_plugin import config as config_module
from sglang_fair.sglang_plugin import http_hooks
from sglang_fair.sglang_plugin.config import ENV_CONFIG, FairConfig, build_config
from sglang_fair.sglang_plugin.router_link import ENV_ROUTER

TOKEN = GatewayToken("s3cret-gateway-token-0123")
KEYS = parse_key_lines(["k-alice alice", "k-bob bob"])
Sent = list[MutableMapping[str, Any]]


def call(app: Any, headers: dict[str, str], body: dict[str, Any] | bytes) -> tuple[Sent, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent: Sent = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope: dict[str, Any] = {
        "type": "http", "path": "/v1/chat/completions", "method": "POST", "client": ("10.0.0.9", 1),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(app(scope, receive, send))
    return sent, scope


def recording_app() -> tuple[Any, dict[str, Any]]:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen["body"] = json.loads((await receive())["body"])
        seen["client"] = scope.get("state", {}).get("sglang_fair_client")

    return app, seen


PINS = [
    ({}, {"routed_dp_rank": 1}, "the body field routed_dp_rank"),
    ({}, {"data_parallel_rank": 0}, "the body field data_parallel_rank"),
    ({"X-Data-Parallel-Rank": "1"}, {}, "the x-data-parallel-rank header"),
    ({"X-Override-Routed-Dp-Rank": "1"}, {}, "the x-override-routed-dp-rank header"),
]


@pytest.mark.parametrize(("headers", "body", "how"), PINS)
def test_a_pin_reaches_a_bare_app_and_the_middleware_refuses_it(
    headers: dict[str, str], body: dict[str, Any], how: str
) -> None:
    app, seen = recording_app()
    call(app, headers, {"messages": [], **body})
    assert seen["body"] == {"messages": [], **body}  # the hole: nothing stops it before SGLang
    seen.clear()
    sent, scope = call(PinnedRankMiddleware(app, TOKEN), headers, {"messages": [], **body})
    assert sent[0]["status"] == 403 and not seen and scope["state"][TRUST_KEY] is False
    error = json.loads(sent[1]["body"])
    assert error["object"] == "error" and error["code"] == 403 and how in error["message"]
    sent, _ = call(PinnedRankMiddleware(app, GatewayToken()), headers, {"messages": [], **body})
    assert sent[0]["status"] == 403  # no token configured (the router alone): nobody may pin


@pytest.mark.parametrize(("headers", "body", "how"), PINS)
def test_the_gateway_token_lets_a_pin_through(
    headers: dict[str, str], body: dict[str, Any], how: str
) -> None:
    app, seen = recording_app()
    sent, scope = call(PinnedRankMiddleware(app, TOKEN), {**headers, TOKEN_HEADER: TOKEN.token}, body)
    assert sent == [] and seen["body"] == body and scope["state"][TRUST_KEY] is True
    sent, _ = call(PinnedRankMiddleware(app, TOKEN), {**headers, TOKEN_HEADER: TOKEN.token + "x"}, body)
    assert sent[0]["status"] == 403  # a wrong token is no token


def test_requests_without_a_pin_pass_untouched() -> None:
    app, seen = recording_app()
    body = {"messages": [{"role": "user", "content": "say routed_dp_rank"}], "routed_dp_rank": None}
    sent, scope = call(PinnedRankMiddleware(app, TOKEN), {}, body)
    assert sent == [] and seen["body"] == body and scope["state"][TRUST_KEY] is False
    assert pinned_rank({}, b"not json routed_dp_rank") is None


def test_a_trusted_gateway_names_the_client_even_with_keys() -> None:
    app, seen = recording_app()
    stack = PinnedRankMiddleware(ClientIdentityMiddleware(app, KEYS, "X-Client-Id", lambda: False), TOKEN)
    sent, _ = call(stack, {TOKEN_HEADER: TOKEN.token, "X-Client-Id": "alice"}, {"routed_dp_rank": 0})
    assert sent == [] and seen["client"] == "alice"
    sent, _ = call(stack, {"X-Client-Id": "alice"}, {})
    assert sent[0]["status"] == 401  # without the token the header names nobody
    assert resolve_client({"x-client-id": "bob", "authorization": "Bearer k-alice"}, None, KEYS,
                          "X-Client-Id") == "alice"
    assert resolve_client({"x-client-id": "bob"}, None, KEYS, "X-Client-Id", gateway=True) == "bob"


def test_token_file_is_validated(tmp_path: Any) -> None:
    good = tmp_path / "token"
    good.write_text(TOKEN.token + "\n")
    assert load_token_file(str(good)) == TOKEN and TOKEN.token not in repr(TOKEN)
    for text in ("", "short", "has a space in it, long enough"):
        bad = tmp_path / "bad"
        bad.write_text(text)
        with pytest.raises(ConfigError, match="--gateway-token-file"):
            load_token_file(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        load_token_file(str(tmp_path / "missing"))
    config = build_config({"gateway_token_file": str(good)})
    assert config.edge.gateway_token == TOKEN
    assert build_config(json.loads(config.to_env())).edge.gateway_token == TOKEN  # every SGLang process


@pytest.mark.sglang
def test_the_tokenizer_hook_refuses_an_untrusted_pin(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from sglang.srt.managers.io_struct import GenerateReqInput

    def original(self: Any, obj: Any, request: Any) -> str:
        return "sent"

    def request(trusted: bool) -> SimpleNamespace:
        return SimpleNamespace(scope={"state": {"sglang_fair_client": "alice", TRUST_KEY: trusted}})

    def pinned() -> Any:
        return GenerateReqInput(text="a", routed_dp_rank=1)

    assert http_hooks.generate_request(original, None, pinned(), request(False)) == "sent"  # SGLang's own DP
    token = tmp_path / "token"
    token.write_text(TOKEN.token)
    monkeypatch.setenv(ENV_CONFIG, build_config({"gateway_token_file": str(token)}).to_env())
    config_module._config_of.cache_clear()
    with pytest.raises(ValueError, match="only a trusted gateway"):
        http_hooks.generate_request(original, None, pinned(), request(False))
    assert http_hooks.generate_request(original, None, pinned(), request(True)) == "sent"
    monkeypatch.delenv(ENV_CONFIG)
    monkeypatch.setenv(ENV_ROUTER, json.dumps({"directory": "/tmp/x", "num_workers": 2}))
    with pytest.raises(ValueError, match="only a trusted gateway"):
        http_hooks.generate_request(original, None, pinned(), request(False))
    assert http_hooks.generate_request(original, None, pinned(), request(True)) == "sent"


def test_the_middleware_is_installed_with_the_router_or_a_token() -> None:
    assert http_hooks.pins_guarded(FairConfig(), router=True)
    assert http_hooks.pins_guarded(FairConfig(edge=EdgeConfig(gateway_token=TOKEN)), router=False)
    assert not http_hooks.pins_guarded(FairConfig(), router=False)


def test_the_403_says_what_to_do_with_and_without_the_router() -> None:
    """On a one-worker server with a gateway token there is no router: the message names the token file
    instead of a router that does not run."""
    app, _ = recording_app()
    pin = {"messages": [], "routed_dp_rank": 0}
    alone, _ = call(PinnedRankMiddleware(app, TOKEN), {}, pin)
    message = json.loads(alone[1]["body"])["message"]
    assert "router" not in message and "--gateway-token-file" in message and TOKEN_HEADER in message
    routed, _ = call(PinnedRankMiddleware(app, TOKEN, router=True), {}, pin)
    assert "the fair router picks the worker" in json.loads(routed[1]["body"])["message"]
