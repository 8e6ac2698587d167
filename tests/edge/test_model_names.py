"""The ``model`` check at ``serve``'s edge (no SGLang needed): the accepted names, 404 with its body for
another, a missing or non-string ``model`` served, the body read once with the other middlewares, and
``--accept-any-model`` installing no check."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Callable, MutableMapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from plugin_support import sglang_args

from sglang_fair.dashboard.status import StatusMiddleware
from sglang_fair.edge.admins import AdminOnlyMiddleware
from sglang_fair.edge.bodies import JsonBodyMiddleware
from sglang_fair.edge.budget_gate import BudgetMiddleware
from sglang_fair.edge.identity import ClientIdentityMiddleware
from sglang_fair.edge.limits import EdgeLimitsMiddleware
from sglang_fair.edge.model_names import ModelNameMiddleware, ModelNames, refusal
from sglang_fair.edge.trust import PinnedRankMiddleware
from sglang_fair.metrics.tenant_series import TenantMetricsMiddleware
from sglang_fair.sglang_plugin import http_hooks
from sglang_fair.sglang_plugin.config import ENV_CONFIG, FairConfig, build_config
from sglang_fair.sglang_plugin.router_link import ENV_ROUTER

NAMES = ModelNames.of("tiny", "/models/tiny")
CHAT = "/v1/chat/completions"
NOT_FOUND = {"object": "error", "message": "The model `gpt-4o` does not exist. This server serves `tiny`: "
             "send that, `default` or no `model` (started with --accept-any-model, it serves whatever name a "
             "request gives).", "type": "NotFoundError", "param": "model", "code": 404}
Sent = list[MutableMapping[str, Any]]


@pytest.mark.parametrize("model", ["tiny", "/models/tiny", "default"])
def test_the_served_name_the_path_and_default_are_accepted(model: str) -> None:
    assert refusal(CHAT, {"model": model, "messages": []}, NAMES) is None


def test_another_name_gets_404_with_an_openai_style_body() -> None:
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
        assert refusal(path, {"model": "gpt-4o"}, NAMES) == NOT_FOUND
    assert refusal(CHAT, {"model": "Tiny"}, NAMES) is not None  # names are exact, as OpenAI's
    assert refusal(CHAT, {"model": ""}, NAMES) is not None


def test_no_model_a_non_string_or_another_route_is_left_to_sglang() -> None:
    assert refusal(CHAT, {"messages": []}, NAMES) is None
    assert refusal(CHAT, {"model": 5}, NAMES) is None and refusal(CHAT, {"model": None}, NAMES) is None
    assert refusal(CHAT, ["not", "an", "object"], NAMES) is None and refusal(CHAT, None, NAMES) is None
    assert refusal("/generate", {"model": "gpt-4o"}, NAMES) is None
    assert refusal(CHAT, {"model": "gpt-4o"}, None) is None  # names unknown: any name passes


def test_lora_adapters_by_name_or_after_the_model() -> None:
    names = ModelNames.of("tiny", "/models/tiny", ["sql", "chat"])
    assert all(names.accepts(m) for m in ("sql", "tiny:sql", "/models/tiny:chat", "default:sql"))
    assert not any(names.accepts(m) for m in ("tiny:other", "other:sql", "other"))


def run(wrap: Callable[[Any], Any], body: bytes, headers: dict[str, str] | None = None,
        method: str = "POST", path: str = CHAT) -> tuple[Sent, list[bytes], int]:
    """One request through the middlewares ``wrap`` puts around an app that reads the body and answers
    200: (what was sent, the bodies the app read, how often the server's ``receive`` was called)."""
    sent: Sent = []
    read: list[bytes] = []
    asked = [0]

    async def receive() -> MutableMapping[str, Any]:
        asked[0] += 1
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        read.append((await receive()).get("body", b""))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    scope = {"type": "http", "path": path, "method": method, "client": ("10.0.0.1", 5),
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    asyncio.run(wrap(app)(scope, receive, send))
    return sent, read, asked[0]


def checking(names: ModelNames | None) -> Callable[[Any], Any]:
    return lambda app: ModelNameMiddleware(app, names=lambda: names)


def test_the_middleware_answers_404_before_the_app_and_serves_the_rest() -> None:
    sent, read, _ = run(checking(NAMES), json.dumps({"model": "gpt-4o", "messages": []}).encode())
    assert sent[0]["status"] == 404 and json.loads(sent[1]["body"]) == NOT_FOUND and read == []
    for body in ({"model": "default", "messages": []}, {"messages": []}):
        data = json.dumps(body).encode()
        sent, read, _ = run(checking(NAMES), data)
        assert sent[0]["status"] == 200 and read == [data]  # the app reads the body whole
    sent, read, asked = run(checking(None), b'{"model": "gpt-4o"}')  # SGLang not set up yet
    assert sent[0]["status"] == 200 and asked == 1
    for method, path in (("GET", CHAT), ("POST", "/generate")):
        sent, _, _ = run(checking(NAMES), b'{"model": "gpt-4o"}', method=method, path=path)
        assert sent[0]["status"] == 200


class FakeApp:
    """What ``install_http`` touches of SGLang's FastAPI app: it records the middlewares."""

    def __init__(self) -> None:
        self.state = SimpleNamespace()
        self.added: list[tuple[Any, dict[str, Any]]] = []

    def add_route(self, *args: Any, **kwargs: Any) -> None:
        pass

    def add_middleware(self, cls: Any, **kwargs: Any) -> None:
        self.added.append((cls, kwargs))

    def wrap(self, app: Any) -> Any:
        """The middlewares around ``app`` as Starlette stacks them (the last added runs first)."""
        for cls, kwargs in self.added:
            app = cls(app, **kwargs)
        return app


def installed(monkeypatch: pytest.MonkeyPatch, config: FairConfig, policy: str = "dlpm_light") -> FakeApp:
    """``install_http`` on a fake SGLang serving ``tiny`` from ``/models/tiny``."""
    manager = SimpleNamespace(served_model_name="tiny", model_path="/models/tiny", lora_registry=None)
    fake = FakeApp()
    package = types.ModuleType("sglang.srt.entrypoints")
    package.http_server = SimpleNamespace(  # type: ignore[attr-defined]
        app=fake, get_global_state=lambda: SimpleNamespace(tokenizer_manager=manager))
    monkeypatch.setitem(sys.modules, "sglang.srt.entrypoints", package)
    monkeypatch.setenv(ENV_CONFIG, config.to_env())
    monkeypatch.delenv(ENV_ROUTER, raising=False)
    http_hooks.install_http(sglang_args(policy, host="127.0.0.1"))
    return fake


def test_serve_checks_after_the_key_and_reads_the_body_once(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("k-alice alice\n")
    fake = installed(monkeypatch, build_config({"client_keys": str(keys)}))
    order = [cls for cls, _ in fake.added]
    assert order == [ModelNameMiddleware, TenantMetricsMiddleware, BudgetMiddleware, AdminOnlyMiddleware,
                     ClientIdentityMiddleware, JsonBodyMiddleware, EdgeLimitsMiddleware,
                     StatusMiddleware]  # budgets: a reload may give them
    unknown = json.dumps({"model": "gpt-4o", "prompt": "a"}).encode()
    sent, _, _ = run(fake.wrap, unknown)
    assert sent[0]["status"] == 401  # the key first, as OpenAI: a stranger learns nothing
    sent, read, asked = run(fake.wrap, unknown, {"Authorization": "Bearer k-alice"})
    assert sent[0]["status"] == 404 and json.loads(sent[1]["body"])["param"] == "model" and read == []
    good = json.dumps({"model": "/models/tiny", "prompt": "a"}).encode()
    sent, read, asked = run(fake.wrap, good, {"Authorization": "Bearer k-alice"})
    assert sent[0]["status"] == 200 and read == [good] and asked == 1


def test_every_middleware_that_needs_the_body_shares_one_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON check, the pin check, identity (the ``user`` field) and the model check all read the
    body: it is buffered once and parsed once, and the app still reads it whole."""
    fake = installed(monkeypatch, build_config({"client_max_inflight": 2}))
    edge = [cls for cls, _ in fake.added].index(JsonBodyMiddleware)  # runs just inside it, as installed
    fake.added.insert(edge, (PinnedRankMiddleware, {"token": FairConfig().edge.gateway_token}))
    buffered, parsed = counting(monkeypatch, "buffer_body"), counting(monkeypatch, "parse_json")
    body = json.dumps({"model": "tiny", "user": "carol", "prompt": "a"}).encode()
    sent, read, asked = run(fake.wrap, body)
    assert sent[0]["status"] == 200 and read == [body] and asked == 1
    assert len(buffered) == 5 and len({id(replay) for _, replay in buffered}) == 1  # one buffer, shared
    assert len(parsed) == 1


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Record the results of ``asgi.NAME`` (each module that imported it sees the counter)."""
    import sglang_fair.edge.asgi as asgi
    import sglang_fair.edge.bodies as bodies
    import sglang_fair.edge.identity as identity
    import sglang_fair.edge.model_names as model_names
    import sglang_fair.edge.trust as trust

    results: list[Any] = []
    original = getattr(asgi, name)
    if asyncio.iscoroutinefunction(original):
        async def wrapped(*args: Any) -> Any:
            results.append(await original(*args))
            return results[-1]
    else:
        def wrapped(*args: Any) -> Any:  # type: ignore[misc]
            results.append(original(*args))
            return results[-1]
    for module in (asgi, bodies, identity, trust, model_names):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, wrapped)
    return results


def test_accept_any_model_installs_no_check(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = installed(monkeypatch, build_config({"accept_any_model": True}))
    assert ModelNameMiddleware not in [cls for cls, _ in fake.added]
    sent, read, _ = run(fake.wrap, b'{"model": "gpt-4o", "prompt": "a"}')
    assert sent[0]["status"] == 200 and read == [b'{"model": "gpt-4o", "prompt": "a"}']
    assert installed(monkeypatch, FairConfig(), policy="fcfs").added[0][0] is ModelNameMiddleware


def test_the_flag_is_on_serves_command_line_and_travels() -> None:
    from sglang_fair.cli import build_parser
    from sglang_fair.sglang_plugin.config import config_from_env

    args = build_parser().parse_args(["serve", "--accept-any-model"])
    assert args.accept_any_model is True
    config = build_config({"accept_any_model": True})
    assert config_from_env({ENV_CONFIG: config.to_env()}).edge.accept_any_model is True
    assert FairConfig().edge.accept_any_model is False
