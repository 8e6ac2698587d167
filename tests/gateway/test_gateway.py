"""The gateway against fake servers (no SGLang): discovery, the worker table, routing on the servers'
token ids, the pinned rank, identity, streaming relayed as it comes, and the finish feedback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
import aiohttp
import uvicorn
from fake_sglang import FakeSGLang, Running, fake_tokens

from sglang_fair import cli
from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.edge.trust import TOKEN_HEADER, GatewayToken
from sglang_fair.gateway.app import Gateway
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.front import make_app
from sglang_fair.gateway.launch import build_gateway, discover_servers
from sglang_fair.gateway.servers import ServerInfo, WorkerTable
from sglang_fair.harness.server import free_port
from sglang_fair.routing import RouterConfig

pytestmark = pytest.mark.timers

TOKEN = GatewayToken("gateway-token-0123456789abcdef")
CHAT = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3}


EDGE_FIELDS = frozenset(f.name for f in dataclasses.fields(EdgeConfig))


def config(urls: list[str], policy: str = "round_robin", **kw: Any) -> GatewayConfig:
    """A gateway's config over ``urls``; the keywords of :class:`EdgeConfig` go to its edge."""
    kw.setdefault("discovery_timeout", 2.0)
    edge = EdgeConfig(**{k: kw.pop(k) for k in list(kw) if k in EDGE_FIELDS})
    return GatewayConfig(worker_urls=",".join(urls), port=free_port(), router=RouterConfig(policy=policy),
                         edge=edge, **kw)


@asynccontextmanager
async def gateway_at(cfg: GatewayConfig) -> AsyncIterator[tuple[str, Gateway]]:
    async with serving(cfg, await discover_servers(cfg)) as running:
        yield running


@asynccontextmanager
async def serving(cfg: GatewayConfig, table: WorkerTable) -> AsyncIterator[tuple[str, Gateway]]:
    gateway = build_gateway(cfg, table)
    server = uvicorn.Server(uvicorn.Config(make_app(gateway), host="127.0.0.1", port=cfg.port,
                                           log_level="warning"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{cfg.port}", gateway
    finally:
        server.should_exit = True
        await task


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 30))


async def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers or {}) as resp:
        return resp.status, await resp.json(content_type=None)


def test_worker_table_numbers_every_rank_of_every_server() -> None:
    a, b = ServerInfo("http://a", "m", 2), ServerInfo("http://b", "m", 1)
    table = WorkerTable([a, b])
    assert [(w.index, w.server.url, w.rank) for w in table] == [(0, "http://a", 0), (1, "http://a", 1),
                                                                 (2, "http://b", 0)]
    assert table.index("http://b", 0) == 2 and table[1].pinned_rank() == 1
    assert table[2].pinned_rank() is None  # one rank: SGLang ignores a pin there, none is sent


def test_discovery_reads_model_and_dp_size_and_refuses_mixed_models(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Running(FakeSGLang(dp_size=2), FakeSGLang(dp_size=1)) as urls:
        table = asyncio.run(discover_servers(config(urls)))
        found = [(s.url, s.model, s.dp_size) for s in table.servers]
        assert found == [(urls[0], "tiny", 2), (urls[1], "tiny", 1)]
        assert len(table) == 3
    with Running(FakeSGLang(model="a"), FakeSGLang(model="b")) as urls:
        with pytest.raises(ConfigError, match="different models"):
            asyncio.run(discover_servers(config(urls)))
        code = cli.main(["gateway", "--worker-urls", ",".join(urls), "--discovery-timeout", "2"])
        assert code == 2 and f"{urls[0]} serves 'a'" in capsys.readouterr().err
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError, match="no answer from /server_info"):
        asyncio.run(discover_servers(config([dead], discovery_timeout=1.0)))


@pytest.mark.parametrize(("urls", "message"), [
    ("", "at least one server"), ("ftp://x:1", "not a server base URL"), ("http://a:1/v1", "not a server"),
    ("http://a:1,http://a:1/", "listed twice"),
])
def test_bad_worker_urls_are_refused(urls: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=message):
        GatewayConfig(worker_urls=urls)
    assert cli.main(["gateway", "--worker-urls", urls]) == 2 and message in capsys.readouterr().err


def test_requests_go_to_every_worker_with_the_rank_pinned_and_the_client_named() -> None:
    a, b = FakeSGLang(dp_size=2), FakeSGLang(dp_size=1)
    with Running(a, b) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, gateway_token=TOKEN)) as (url, gateway):
                for path, body in [("/v1/chat/completions", CHAT), ("/generate", {"text": "hi"}),
                                   ("/v1/completions", {"prompt": "hi", "n": 2, "routed_dp_rank": 1})]:
                    status, answer = await post(url + path, body, {"X-Client-Id": "carol",
                                                                  "X-Data-Parallel-Rank": "1"})
                    assert status == 200, answer
                assert gateway.router.state()["workers"][0]["finished"] == 1
        run(scenario)
    assert [c.body.get("routed_dp_rank") for c in a.relayed()] == [0, 1] and len(b.relayed()) == 1
    assert "routed_dp_rank" not in b.relayed()[0].body and b.relayed()[0].body["n"] == 2  # n passes through
    for call in a.relayed() + b.relayed():
        assert call.headers["x-client-id"] == "carol" and call.headers[TOKEN_HEADER] == TOKEN.token
        assert "x-data-parallel-rank" not in call.headers  # the client's own pins never pass


def test_the_global_tree_holds_the_servers_token_ids_and_keeps_a_prefix_on_its_worker() -> None:
    server = FakeSGLang(dp_size=2)
    long_chat = {"messages": [{"role": "user", "content": "a shared document " * 8}], "stream": True}
    with Running(server, FakeSGLang(dp_size=2)) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, policy="cache_aware")) as (url, gateway):
                for _ in range(3):
                    async with aiohttp.ClientSession() as s, s.post(url + "/v1/chat/completions",
                                                                    json=long_chat) as resp:
                        assert resp.status == 200
                        await resp.read()
                tokens = fake_tokens(long_chat)
                matched = gateway.router.policy.tree.match_lengths(tokens)
                assert list(matched.values()) == [len(tokens)]  # exactly the server's ids, one worker
                assert sorted(w["routed"] for w in gateway.router.state()["workers"]) == [0, 0, 0, 3]
        run(scenario)
    tokenized = [c.body for c in server.calls if c.path == "/tokenize"]
    assert tokenized and all("stream" not in body and "messages" in body for body in tokenized)


def test_identity_follows_serves_rules(tmp_path: Path) -> None:
    keys = parse_key_lines(["k-alice alice", "k-bob bob"])
    server = FakeSGLang()
    with Running(server) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, key_table=keys)) as (url, _):
                status, answer = await post(url + "/generate", {"text": "x"},
                                            {"Authorization": "Bearer nope"})
                assert status == 401 and answer["object"] == "error" and answer["code"] == 401
                assert (await post(url + "/generate", {"text": "x"}, {"X-Client-Id": "alice"}))[0] == 401
                status, _ = await post(url + "/generate", {"text": "x", "user": "eve"},
                                       {"Authorization": "Bearer k-bob", "X-Client-Id": "alice"})
                assert status == 200
            async with gateway_at(config(urls)) as (url, _):
                await post(url + "/generate", {"text": "x", "user": "dave"})
                await post(url + "/generate", {"text": "x"})
        run(scenario)
    named = [c.headers["x-client-id"] for c in server.relayed()]
    assert named == ["bob", "dave", "default"]
    assert all("authorization" not in c.headers for c in server.relayed())


def test_a_stream_is_relayed_as_it_comes_and_its_end_is_the_finish() -> None:
    hold = threading.Event()
    with Running(FakeSGLang(hold=hold)) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (url, gateway):
                body = {**CHAT, "stream": True, "max_tokens": 4}
                async with aiohttp.ClientSession() as s, s.post(url + "/v1/chat/completions",
                                                                json=body) as resp:
                    first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)  # the rest is held
                    assert json.loads(first[5:])["choices"][0]["delta"]["content"] == "w"
                    assert gateway.router.policy.queue == [1]
                    hold.set()
                    rest = await resp.read()
                assert rest.count(b"data: ") == 4 and rest.endswith(b"data: [DONE]\n\n")
                await asyncio.sleep(0.1)
                assert gateway.router.policy.queue == [0]
                assert gateway.router.state()["workers"][0]["finished"] == 1
        run(scenario)


def test_finish_feedback_charges_the_output_tokens() -> None:
    with Running(FakeSGLang(dp_size=2)) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, policy="d2lpm")) as (url, gateway):
                before = gateway.router.policy.counter_view()
                assert (await post(url + "/v1/chat/completions", {**CHAT, "max_tokens": 5},
                                   {"X-Client-Id": "zed"}))[0] == 200
                assert before == {} and "zed" in gateway.router.policy.counter_view()
                spent = gateway.router.policy.counter_view()["zed"]
                assert (await post(url + "/generate", {"input_ids": [5, 6], "sampling_params": {
                    "max_new_tokens": 7}}, {"X-Client-Id": "zed"}))[0] == 200
                after = gateway.router.policy.counter_view()["zed"]
                w_e, w_q = 1.0, 2.0  # the default cost: 2 input tokens, 7 output tokens
                assert sum(spent) - sum(after) == pytest.approx(w_e * 2 + w_q * 7)
        run(scenario)


def test_a_server_gone_after_discovery_is_a_503_naming_it_and_frees_the_queue() -> None:
    fake = Running(FakeSGLang())
    with fake as urls:
        cfg = config(urls)
        table = asyncio.run(discover_servers(cfg))
    async def scenario() -> None:
        async with serving(cfg, table) as (url, gateway):
            status, answer = await post(f"{url}/generate", {"input_ids": [1]})
            assert status == 503 and urls[0] in answer["message"], answer
            assert gateway.router.policy.queue == [0] and gateway.supervisor.health.out.keys() == {urls[0]}
    run(scenario)


def test_a_request_that_cannot_be_sent_frees_the_queue() -> None:
    with Running(FakeSGLang()) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (url, gateway):
                status, _ = await post(url + "/v1/chat/completions", {**CHAT, "user": "bad\x01name"})
                assert status == 500  # its client name cannot be a header to the server
                assert gateway.router.policy.queue == [0]
        run(scenario)


def test_requests_not_started_on_a_gone_server_are_served_by_another() -> None:
    gone, live = FakeSGLang(dp_size=2), FakeSGLang()
    with Running(live) as live_urls:
        with Running(gone) as gone_urls:
            cfg = config(gone_urls + live_urls)
            table = asyncio.run(discover_servers(cfg))
        async def scenario() -> None:
            async with serving(cfg, table) as (url, gateway):
                for i in range(6):
                    status, _ = await post(f"{url}/generate", {"input_ids": [i + 1]})
                    assert status == 200
                assert gateway.supervisor.health.out.keys() == {gone_urls[0]}
                assert gateway.router.policy.alive == [2] and gateway.router.policy.queue == [0, 0, 0]
        run(scenario)
    assert len(live.relayed()) == 6


def test_a_server_that_does_not_connect_in_time_did_not_start_the_request() -> None:
    """A host gone from the network is silent, not refusing: a connect timeout also sends the request
    elsewhere (it was a 503, as if the server had started it). The silent server: a listening socket
    whose accept queue is full, so the kernel drops further connection attempts."""
    import socket

    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    fillers = []
    while True:  # fill the accept queue (its length depends on the kernel) until a connect hangs
        try:
            fillers.append(socket.create_connection(hole.getsockname(), timeout=0.2))
        except TimeoutError:
            break
        assert len(fillers) < 64
    live = FakeSGLang()
    with Running(live) as urls:
        silent = f"http://127.0.0.1:{hole.getsockname()[1]}"
        cfg = config([silent, *urls], connect_timeout=0.3)
        table = WorkerTable([ServerInfo(silent, "tiny", 1), ServerInfo(urls[0], "tiny", 1)])

        async def scenario() -> None:
            async with serving(cfg, table) as (url, gateway):
                status, _ = await post(f"{url}/generate", {"input_ids": [1]})
                assert status == 200 and gateway.supervisor.health.out.keys() == {silent}
        run(scenario)
    assert len(live.relayed()) == 1
    for sock in (*fillers, hole):
        sock.close()


def test_a_server_that_breaks_off_a_started_request_fails_it_with_503_and_is_not_retried() -> None:
    broken, other = FakeSGLang(break_off=True), FakeSGLang()
    with Running(broken, other) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (url, gateway):
                status, answer = await post(f"{url}/generate", {"input_ids": [1]})
                assert status == 503 and "broke off" in answer["message"], answer
                assert gateway.supervisor.health.out.keys() == {urls[0]}
        run(scenario)
    assert len(broken.relayed()) == 1 and other.relayed() == []


def test_a_failed_health_probe_takes_a_server_out_and_a_passed_one_takes_it_back() -> None:
    sick, well = FakeSGLang(healthy=False), FakeSGLang()
    with Running(sick, well) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls, health_interval=0.05)) as (url, gateway):
                await until(lambda: urls[0] in gateway.supervisor.health.out)
                assert gateway.router.policy.alive == [1]
                for i in range(4):
                    assert (await post(f"{url}/generate", {"input_ids": [i + 1]}))[0] == 200
                sick.healthy = True
                await until(lambda: not gateway.supervisor.health.out)
                assert gateway.router.policy.alive == [0, 1]
        run(scenario)
    assert sick.relayed() == [] and len(well.relayed()) == 4


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def test_a_client_that_leaves_mid_stream_ends_the_relay_and_frees_the_queue() -> None:
    hold = threading.Event()
    with Running(FakeSGLang(hold=hold)) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (url, gateway):
                body = {**CHAT, "stream": True, "max_tokens": 50}
                async with aiohttp.ClientSession() as s:
                    resp = await s.post(url + "/v1/chat/completions", json=body)
                    await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 5)
                    resp.close()  # the client goes away while the server still streams
                assert gateway.router.policy.queue == [1]
                hold.set()
                for _ in range(100):
                    if gateway.router.policy.queue == [0]:
                        break
                    await asyncio.sleep(0.05)
                assert gateway.router.policy.queue == [0]
                assert gateway.router.state()["workers"][0]["finished"] == 1
        run(scenario)


def test_a_servers_refusal_is_relayed_with_its_retry_after() -> None:
    with Running(FakeSGLang(refuse=429)) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (url, gateway):
                for stream in (False, True):
                    async with aiohttp.ClientSession() as s, s.post(
                            url + "/v1/chat/completions", json={**CHAT, "stream": stream}) as resp:
                        assert resp.status == 429 and resp.headers["retry-after"] == "1"
                        assert (await resp.json())["code"] == 429
                assert gateway.router.policy.queue == [0]
        run(scenario)


def test_prompts_are_tokenized_only_by_servers_not_taken_out() -> None:
    """A server taken out (stopped, gone) would hold every request's /tokenize call up."""
    out, live = FakeSGLang(), FakeSGLang()
    with Running(out, live) as urls:
        async def scenario() -> None:
            async with gateway_at(config(urls)) as (url, gateway):
                gateway.supervisor.health.take_out(urls[0], "a test")
                for _ in range(4):
                    status, _ = await post(f"{url}/v1/chat/completions", CHAT)
                    assert status == 200
        run(scenario)
    assert [c.path for c in out.calls if c.path == "/tokenize"] == []
    assert len([c for c in live.calls if c.path == "/tokenize"]) == 4
