"""The gateway's own limits (no SGLang): a body over --max-body-bytes gets 413 before it is read, a
client at --client-max-inflight gets 429 with Retry-After, and a client idle for --client-ttl is
forgotten by the policy (one with a request in flight is not)."""

from __future__ import annotations

import asyncio
import threading

import pytest

pytest.importorskip("fastapi")
import aiohttp
from fake_sglang import FakeSGLang, Running
from test_gateway import CHAT, config, gateway_at, post, run

from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import ServerInfo, WorkerTable
from sglang_fair.routing import RouterConfig, make_routing_policy


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
