"""The gateway's /fairness, fairness page and /metrics over fake servers: the servers' figures summed per
client, what only the gateway knows added (requests in flight, answers), access as at serve."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

pytest.importorskip("fastapi")
import aiohttp
import uvicorn
from fake_sglang import FakeSGLang, Running

from sglang_fair.dashboard.history import History
from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.edge.trust import TOKEN_HEADER, GatewayToken
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.front import make_app
from sglang_fair.gateway.launch import build_gateway, discover_servers
from sglang_fair.harness.server import free_port
from sglang_fair.routing import RouterConfig

pytestmark = pytest.mark.timers  # the gateway keeps timers (health, the page's sampler)
TOKEN = GatewayToken("gateway-token-0123456789abcdef")
KEYS = parse_key_lines(["k-a a", "k-b b", "k-ops ops"], "keys")
ADMIN, CLIENT = {"Authorization": "Bearer k-ops"}, {"Authorization": "Bearer k-a"}
CHAT = {"messages": [{"role": "user", "content": "hi"}]}
ANSWERS_A = 'sglang_fair_gateway_client_answers_total{client="a",kind="requests"} 2.0'
PARAMS = {"policy": "dlpm_light", "quantum": 65536.0, "w_e": 1.0, "w_q": 2.0, "context_len": 2048,
          "workers": 1, "router": None}


def server_page(service_a: float, service_b: float) -> dict[str, Any]:
    rows = [{"client": "a", "weight": 1.0, "service": service_a, "waiting": 2, "running": 1, "requests": 3,
             "input_tokens": 100, "cached_tokens": 40, "output_tokens": 9},
            {"client": "b", "weight": 1.0, "service": service_b, "waiting": 0, "running": 0, "requests": 1,
             "input_tokens": 10, "cached_tokens": 0, "output_tokens": 3}]
    return {"policy": "dlpm_light", "clients": rows, "params": PARAMS}


@asynccontextmanager
async def gateway(urls: list[str]) -> AsyncIterator[tuple[str, Any]]:
    cfg = GatewayConfig(worker_urls=",".join(urls), port=free_port(),
                        router=RouterConfig(policy="round_robin"), discovery_timeout=2.0,
                        edge=EdgeConfig(key_table=KEYS, gateway_token=TOKEN, fairness_admins="ops"))
    app = make_app(build_gateway(cfg, await discover_servers(cfg)))
    app.state.fairness_page.history = History(window_s=60, interval_s=0.1)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=cfg.port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{cfg.port}", app.state.fairness_page
    finally:
        server.should_exit = True
        await task


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.get(url, headers=headers or {}) as resp:
        text = await resp.text()
        return resp.status, (await resp.json(content_type=None)) if "json" in resp.content_type else text


def test_the_gateway_sums_the_servers_figures_adds_its_own_and_guards_them_as_serve_does() -> None:
    one, two = FakeSGLang(page=server_page(100, 10)), FakeSGLang(page=server_page(50, 0))

    async def scenario() -> None:
        with Running(one, two) as urls:
            async with gateway(urls) as (url, _):
                await asyncio.sleep(0.5)
                status, merged = await get(url + "/fairness", ADMIN)
                assert status == 200 and merged["servers"] == 2
                assert merged["clients"]["a"]["service"] == 150 and merged["clients"]["a"]["waiting"] == 4
                assert one.page_headers.get(TOKEN_HEADER) == TOKEN.token  # read as the trusted gateway
                assert (await get(url + "/fairness", CLIENT))[1]["clients"].keys() == {"a"}
                assert (await get(url + "/fairness"))[0] == 401
                async with aiohttp.ClientSession() as s:
                    for key in ("k-a", "k-a", "nope"):
                        async with s.post(url + "/v1/chat/completions", json=CHAT,
                                          headers={"Authorization": f"Bearer {key}"}) as resp:
                            await resp.read()
                one.page, two.page = server_page(160, 10), server_page(50, 30)
                await asyncio.sleep(0.5)
                status, data = await get(url + "/fairness/ui/data", ADMIN)
                rows = {r["client"]: r for r in data["clients"]}
                assert status == 200 and data["source"] == "gateway" and rows["a"]["service"] == 210
                assert (rows["a"]["answers"], rows["a"]["in_flight"]) == (2, 0)
                assert rows["(no client)"]["client_errors"] == 1  # the unknown key's 401
                assert max(data["series"]["clients"]["a"]) > 0
                assert data["bound"]["value"] is None and "round_robin" in data["bound"]["formula"]
                assert [w["state"] for w in data["workers"]] == ["idle", "idle"]
                status, html = await get(url + "/fairness/ui")
                assert status == 200 and "/data" in html and "<svg" in html
                assert (await get(url + "/metrics", CLIENT))[0] == 403
                status, text = await get(url + "/metrics", ADMIN)
                assert status == 200 and ANSWERS_A in text
                assert "sglang_fair_gateway_worker_queue{" in text
                two.page = None  # server two stops answering: its last figures stay, marked stale
                await asyncio.sleep(0.5)
                status, merged = await get(url + "/fairness", ADMIN)
                assert merged["clients"]["a"]["service"] == 210 and list(merged["stale"]) == [urls[1]]

    asyncio.run(asyncio.wait_for(scenario(), 30))
