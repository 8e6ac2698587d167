"""The gateway's own limits (no SGLang): a body over --max-body-bytes gets 413 before it is read, a
client at --client-max-inflight gets 429 with Retry-After, a client idle for --client-ttl is
forgotten by the policy (one with a request in flight is not), and a ``model`` the servers do not serve
gets 404 before routing (unless --accept-any-model)."""

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("fastapi")
import aiohttp
from fake_sglang import FakeSGLang, Running
from test_gateway import CHAT, config, gateway_at, post, run

from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import ServerInfo, WorkerTable, server_info
from sglang_fair.routing import RouterConfig, make_routing_policy

pytestmark = pytest.mark.timers


def test_a_body_over_the_limit_gets_413_before_any_server_hears_of_it() -> None:
    fake = FakeSGLang()
    with Running(fake) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, max_body_bytes=1000)) as (gw, _):
                big = {**CHAT, "messages": [{"role": "user", "content": "x" * 2000}]}
                status, body = await post(gw + "/v1/chat/completions", big)
                assert status == 413 and body["type"] == "RequestTooLarge", body
                status, _ = await post(gw + "/v1/chat/completions", CHAT)
                assert status == 200

        run(scenario)
    assert len(fake.relayed()) == 1


def test_a_client_at_its_bound_gets_429_and_the_others_are_served() -> None:
    fake = FakeSGLang(hold_whole=threading.Event())
    with Running(fake) as urls:
        async def scenario() -> None:
            cfg = config(urls, client_max_inflight=1)
            async with gateway_at(cfg) as (gw, _), aiohttp.ClientSession() as s:
                held = asyncio.create_task(s.post(gw + "/v1/chat/completions", json=CHAT,
                                                  headers={"X-Client-Id": "busy"}))
                while not fake.relayed():
                    await asyncio.sleep(0.01)
                async with s.post(gw + "/v1/chat/completions", json=CHAT,
                                  headers={"X-Client-Id": "busy"}) as refused:
                    assert refused.status == 429 and refused.headers["retry-after"] == "1"
                    assert "limit per client" in (await refused.json())["message"]
                fake.hold_whole.set()  # type: ignore[union-attr]
                status, _ = await post(gw + "/v1/chat/completions", CHAT, {"X-Client-Id": "other"})
                assert status == 200 and (await held).status == 200

        run(scenario)


def test_idle_clients_are_forgotten_after_the_ttl_and_busy_ones_kept() -> None:
    table = WorkerTable([ServerInfo("http://a", "m", 2)])
    policy = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=2))
    forgotten: list[str] = []
    policy.forget = forgotten.append  # type: ignore[method-assign]
    now = [1000.0]
    router = GatewayRouter(policy, table, client_ttl=60.0, clock=lambda: now[0])
    idle = router.route("idle", [1, 2, 3])
    router.finish(idle, 4)
    busy = router.route("busy", [4, 5, 6])
    now[0] += 61.0
    assert router.expire() == ["idle"] and forgotten == ["idle"]
    now[0] += 61.0
    assert router.expire() == []  # still in flight: kept
    router.finish(busy, 2)
    now[0] += 30.0
    assert router.expire() == []
    now[0] += 31.0
    assert router.expire() == ["busy"] and router.forgotten == 2
    assert GatewayRouter(policy, table, clock=lambda: now[0]).expire() == []  # TTL 0: never


NOT_FOUND = {"object": "error", "message": "The model `gpt-4o` does not exist. This server serves `tiny`: "
             "send that, `default` or no `model` (started with --accept-any-model, it serves whatever name a "
             "request gives).", "type": "NotFoundError", "param": "model", "code": 404}


def test_an_unknown_model_gets_404_before_routing_and_the_servers_names_pass() -> None:
    fake = FakeSGLang()  # serves "tiny" from /m/tiny
    with Running(fake) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (gw, gateway):
                status, body = await post(gw + "/v1/chat/completions", {**CHAT, "model": "gpt-4o"})
                assert (status, body) == (404, NOT_FOUND)
                status, body = await post(gw + "/v1/completions", {"prompt": "a", "model": "gpt-4o"})
                assert (status, body) == (404, NOT_FOUND)
                assert [c.path for c in fake.calls] == ["/server_info"]  # no /tokenize, nothing relayed
                assert sum(gateway.router.routed) == 0 and not gateway.router.clients.inflight  # no charge
                for model in ("tiny", "/m/tiny", "default"):
                    status, _ = await post(gw + "/v1/chat/completions", {**CHAT, "model": model})
                    assert status == 200, model
                status, _ = await post(gw + "/v1/chat/completions", CHAT)  # no model: served
                assert status == 200

        run(scenario)
    assert [c.body.get("model") for c in fake.relayed()] == ["tiny", "/m/tiny", "default", None]


def test_accept_any_model_relays_any_name() -> None:
    fake = FakeSGLang()
    with Running(fake) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, accept_any_model=True)) as (gw, _):
                status, _ = await post(gw + "/v1/chat/completions", {**CHAT, "model": "gpt-4o"})
                assert status == 200

        run(scenario)
    assert [c.body.get("model") for c in fake.relayed()] == ["gpt-4o"]


def test_the_names_every_server_accepts_and_none_with_lora() -> None:
    a = server_info("http://a", {"served_model_name": "m", "model_path": "/a/m", "dp_size": 1})
    b = server_info("http://b", {"served_model_name": "m", "model_path": "/b/m", "dp_size": 2})
    assert (a.model_path, a.lora) == ("/a/m", False)
    names = WorkerTable([a, b]).model_names()
    assert names is not None and names.names == {"m", "default"}  # a path only one server knows: not
    assert WorkerTable([a]).model_names().names == {"m", "/a/m", "default"}  # type: ignore[union-attr]
    lora = server_info("http://c", {"served_model_name": "m", "dp_size": 1, "enable_lora": True})
    assert lora.lora and WorkerTable([a, lora]).model_names() is None  # adapters: the servers decide
