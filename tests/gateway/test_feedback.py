"""The servers' feedback ports and what the gateway does with them (no SGLang): CurveZMQ lets in only
the gateways whose keys the server holds; a worker's heartbeats and evictions reach the gateway;
silence takes a server out and cuts its requests in flight (503, an error event ending a stream), and
beats take it back."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
import aiohttp
import zmq
from fake_sglang import FakeSGLang, Running
from test_gateway import CHAT, config, gateway_at, run

from sglang_fair.core.errors import ConfigError
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.gateway.feedback import FeedbackListener, Liveness, wait_first_beats
from sglang_fair.gateway.health import ServerHealth
from sglang_fair.gateway.routing import RoutedPrompt
from sglang_fair.gateway.servers import ServerInfo, WorkerTable
from sglang_fair.harness.server import free_port
from sglang_fair.links.curve import gateway_keys, make_keys, serve_curve, server_keys
from sglang_fair.links.feedback_hub import FeedbackConfig, FeedbackHub
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.routing.base import DEFAULT_CAPACITY
from sglang_fair.sglang_plugin.worker_hooks import WorkerLink
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode
from sglang_fair_router.state import load_of

pytestmark = pytest.mark.timers


@pytest.fixture()
def keys(tmp_path: Path) -> Path:
    make_keys(tmp_path / "keys", ["gateway", "gateway-2"])
    return tmp_path / "keys"


def one_server(port: int, curve: bool = True, dp_size: int = 1) -> WorkerTable:
    info = ServerInfo("http://127.0.0.1:1", "m", dp_size, f"tcp://127.0.0.1:{port}", curve)
    return WorkerTable([info])


@pytest.fixture()
def hub(keys: Path, tmp_path: Path) -> Iterator[FeedbackHub]:
    running = FeedbackHub(FeedbackConfig(port=free_port(), keys=str(keys)), str(tmp_path)).start()
    yield running
    running.stop()


def port_of(hub: FeedbackHub) -> int:
    return int(hub.pub.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])


def test_liveness_silence_and_a_loop_that_stands_still_while_busy() -> None:
    live = Liveness([0, 1], heartbeat_timeout=3.0, stall_timeout=10.0, now=100.0)
    assert live.verdict(0, busy=False, now=102.0) is None
    assert "no heartbeat for 3.5 s" in str(live.verdict(0, busy=False, now=103.5))  # silent from the start
    live.heard(0, loops=5, now=104.0)
    live.heard(0, loops=5, now=112.0)  # beats, but the loop does not move
    assert live.verdict(0, busy=False, now=112.5) is None  # idle: nothing to stall on
    live.heard(0, loops=5, now=120.0)
    assert live.verdict(0, busy=True, now=120.0) is None
    live.heard(0, loops=5, now=122.6)
    assert "stood still for 10.1 s" in str(live.verdict(0, busy=True, now=122.6))
    live.heard(0, loops=6, now=123.0)
    assert live.verdict(0, busy=True, now=123.0) is None
    assert live.verdict(7, busy=True, now=1e9) is None  # a worker without a feedback port


def test_a_silent_worker_whose_answers_bring_tokens_stays_in_and_is_out_once_they_stop_too() -> None:
    """A feedback link down (heartbeats lost, answers flowing) is not a dead worker; a dead worker
    stops both at once, so it is out as soon as without answers."""
    live = Liveness([0], heartbeat_timeout=3.0, stall_timeout=10.0, now=100.0)
    live.heard(0, loops=5, now=100.0)
    for now in (104.0, 120.0, 200.0):  # silent for 4, 20, 100 s, busy, its last answer 1 s ago
        assert live.verdict(0, busy=True, now=now, answered=now - 1.0) is None
    assert "no heartbeat for 100.0 s" in str(live.verdict(0, busy=True, now=200.0, answered=196.5))
    assert "no heartbeat" in str(live.verdict(0, busy=True, now=200.0))  # the control: no answers at all


def test_a_server_is_out_while_any_source_holds_it_out() -> None:
    table = one_server(1, dp_size=2)
    policy = make_routing_policy(RouterConfig(policy="round_robin", num_workers=2))
    health = ServerHealth(table, policy)
    url = table.servers[0].url
    health.take_out(url, "no heartbeat", "feedback")
    health.take_out(url, "failed its health probe")
    assert policy.alive == [] and health.out == {url: "no heartbeat"}
    health.take_back(url)  # the probe passes; feedback still holds it out
    assert policy.alive == [] and url in health.out
    health.take_back(url, "feedback")
    assert policy.alive == [0, 1] and health.out == {}


def test_one_slow_probe_does_not_take_a_server_out_two_in_a_row_do() -> None:
    table = one_server(1)
    policy = make_routing_policy(RouterConfig(policy="round_robin", num_workers=1))
    health = ServerHealth(table, policy, probe_failures=2)
    url = table.servers[0].url
    answers = iter([False, True, False, False, True])

    async def probe(_: str) -> bool:
        return next(answers)

    seen = []
    for _ in range(5):
        asyncio.run(health.check(probe))
        seen.append(url in health.out)
    assert seen == [False, False, False, True, False]
    assert health.failed[url] == 0


def test_non_loopback_feedback_needs_keys(keys: Path) -> None:
    with pytest.raises(ConfigError, match="--feedback-keys"):
        FeedbackConfig(port=4000, host="0.0.0.0")
    FeedbackConfig(port=4000, host="0.0.0.0", keys=str(keys))
    with pytest.raises(ConfigError, match=r"server\.key_secret"):
        FeedbackConfig(port=4000, keys=str(keys / "missing"))


def test_only_a_gateway_the_server_holds_a_key_of_hears_it(hub: FeedbackHub, keys: Path,
                                                          tmp_path: Path) -> None:
    worker = WorkerLink(None, rank=0, hub=hub.inbound, heartbeat_interval=0.05)
    table = one_server(port_of(hub))
    wait_first_beats(table, gateway_keys(keys), timeout=5.0)
    wait_first_beats(table, gateway_keys(keys, "gateway-2"), timeout=5.0)
    make_keys(tmp_path / "other")  # a gateway pair the server does not hold, with the right server key
    (tmp_path / "other" / "server.key").write_bytes((keys / "server.key").read_bytes())
    with pytest.raises(ConfigError, match="no heartbeat within 1 s"):
        wait_first_beats(table, gateway_keys(tmp_path / "other"), timeout=1.0)
    with pytest.raises(ConfigError, match="publish feedback over CurveZMQ"):
        wait_first_beats(table, None, timeout=1.0)
    plain = zmq.Context.instance().socket(zmq.SUB)  # no CURVE at all: nothing arrives
    plain.setsockopt(zmq.SUBSCRIBE, b"")
    plain.connect(f"tcp://127.0.0.1:{port_of(hub)}")
    assert plain.poll(1000) == 0
    plain.close(0)
    assert worker.seq > 10  # the worker was beating all along


def test_evictions_reach_the_gateways_tree(hub: FeedbackHub, keys: Path) -> None:
    table = one_server(port_of(hub), dp_size=2)
    policy = make_routing_policy(RouterConfig(policy="cache_aware", num_workers=2))
    prompt = list(range(1, 200))
    holder = policy.route(RoutedPrompt("r", "a", pack_tokens(prompt)))
    live = Liveness([0, 1], 5.0, 60.0, time.monotonic())
    listener = FeedbackListener(table, gateway_keys(keys), lambda w, t, s: policy.on_evict(w, t, s), live)
    worker = WorkerLink(None, rank=holder, hub=hub.inbound, heartbeat_interval=0.05)

    async def scenario() -> None:
        task = asyncio.create_task(listener.run())
        while listener.counts["heartbeats"] < 3:
            await asyncio.sleep(0.02)
        worker.evicted([(pack_tokens(prompt), 50)])
        while not listener.counts["evictions"]:
            await asyncio.sleep(0.02)
        task.cancel()

    assert policy.tree.match_lengths(pack_tokens(prompt)) == {holder: len(prompt)}
    run(scenario)
    assert policy.tree.match_lengths(pack_tokens(prompt)) == {holder: 50}
    assert live.beats[holder].loops == worker.loops and live.beats[1 - holder].loops == -1


def test_heartbeat_loads_reach_the_gateways_policy(hub: FeedbackHub, keys: Path) -> None:
    """A worker's load report (what it runs and holds waiting, its cap) teaches the gateway's policy the
    worker's capacity, as the DP router's heartbeats do."""
    table = one_server(port_of(hub), dp_size=2)
    policy = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=2))
    live = Liveness([0, 1], 5.0, 60.0, time.monotonic())
    listener = FeedbackListener(table, gateway_keys(keys), lambda w, t, s: None, live,
                                on_load=lambda w, load: policy.on_load(w, load_of(load)))
    worker = WorkerLink(None, rank=1, hub=hub.inbound, heartbeat_interval=0.05)
    worker.load = wm.Load(running=6, waiting=0, service_rate=800.0, max_running=12)

    async def scenario() -> None:
        task = asyncio.create_task(listener.run())
        for _ in range(250):  # 5 s at most
            if policy.reports[1] is not None:
                break
            await asyncio.sleep(0.02)
        task.cancel()

    assert policy.capacity == [DEFAULT_CAPACITY, DEFAULT_CAPACITY]
    run(scenario)
    assert policy.capacity == [DEFAULT_CAPACITY, 12] and policy.service_rate() == 800.0


class Beating:
    """Heartbeats of worker 0 published as a server's hub would, while ``on`` is set."""

    def __init__(self, keys: Path) -> None:
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.pub = self.context.socket(zmq.PUB)
        self.auth = serve_curve(self.pub, server_keys(keys))
        self.port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.on = threading.Event()
        self.on.set()
        self.done = False
        self.thread = threading.Thread(target=self._beat, daemon=True)

    def _beat(self) -> None:
        seq = 0
        while not self.done:
            if self.on.is_set():
                seq += 1
                self.pub.send(encode(wm.Heartbeat(worker=0, seq=seq, loops=seq)))
            time.sleep(0.05)

    def __enter__(self) -> Beating:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done = True
        self.thread.join(2)
        self.auth.stop()
        self.context.destroy(linger=0)


def test_silence_cuts_the_requests_in_flight_and_beats_take_the_server_back(keys: Path) -> None:
    with Beating(keys) as beats:
        fake = FakeSGLang(feedback={"v": 1, "port": beats.port, "curve": True},
                          hold=threading.Event(), hold_whole=threading.Event())
        with Running(fake) as urls:
            cfg = config(urls, "fair_cache_aware", heartbeat_timeout=0.5,
                         curve_keys=gateway_keys(keys))

            async def scenario() -> None:
                async with gateway_at(cfg) as (gw, gateway), aiohttp.ClientSession() as s:
                    whole = asyncio.create_task(s.post(gw + "/v1/chat/completions", json=CHAT))
                    stream = await s.post(gw + "/v1/chat/completions", json={**CHAT, "stream": True})
                    first = await stream.content.readline()
                    for _ in range(100):  # the whole request may not be routed yet on a busy machine
                        if gateway.router.policy.queue[0] == 2:
                            break
                        await asyncio.sleep(0.05)
                    assert first.startswith(b"data: ") and gateway.router.policy.queue[0] == 2
                    beats.on.clear()  # the server's workers go silent (SIGSTOP, a dropped link)
                    resp = await asyncio.wait_for(whole, 5)
                    body = await resp.json()
                    assert resp.status == 503 and "was taken out: worker 0: no heartbeat" in body["message"]
                    rest = (await asyncio.wait_for(stream.read(), 5)).decode()
                    error = json.loads(rest.strip().split("data: ")[-1])["error"]
                    assert error["code"] == 503 and "no heartbeat" in error["message"], rest
                    assert "[DONE]" not in rest
                    assert gateway.router.policy.queue[0] == 0 and urls[0] in gateway.supervisor.health.out
                    async with s.post(gw + "/v1/chat/completions", json=CHAT) as refused:
                        assert refused.status == 503
                    beats.on.set()
                    for _ in range(100):
                        if not gateway.supervisor.health.out:
                            break
                        await asyncio.sleep(0.05)
                    fake.hold_whole.set()  # type: ignore[union-attr]
                    async with s.post(gw + "/v1/chat/completions", json=CHAT) as again:
                        assert again.status == 200, await again.text()
                    state: Any = await (await s.get(gw + "/gateway/state")).json()
                    assert state["feedback"]["heartbeats"] > 0 and state["servers_out"] == {}
                    assert state["feedback"]["workers"]["0"]["heartbeat_age_s"] < 0.5

            run(scenario)
            fake.hold.set()  # type: ignore[union-attr]


def test_a_gateway_that_did_not_run_for_a_while_hears_the_queued_beats_before_it_judges(keys: Path) -> None:
    """The gateway's own process stands still for 1.5 s (as under SIGSTOP: its ZMQ thread too, so the
    beats of the pause reach it only after it resumes): the silence is the gateway's, no server is
    taken out and its stream in flight completes. Without the pause check (``OwnPause``) the first
    look after the pause took the server out and cut the stream."""
    with Beating(keys) as beats:
        fake = FakeSGLang(feedback={"v": 1, "port": beats.port, "curve": True}, hold=threading.Event())
        with Running(fake) as urls:
            cfg = config(urls, "fair_cache_aware", heartbeat_timeout=0.5, curve_keys=gateway_keys(keys))

            async def scenario() -> None:
                async with gateway_at(cfg) as (gw, gateway), aiohttp.ClientSession() as s:
                    stream = await s.post(gw + "/v1/chat/completions", json={**CHAT, "stream": True})
                    assert (await stream.content.readline()).startswith(b"data: ")
                    beats.on.clear()
                    time.sleep(1.5)  # the whole event loop stands still, and nothing arrives
                    beats.on.set()  # the beats of the pause, heard once it resumes
                    await asyncio.sleep(1.0)
                    assert gateway.supervisor.health.out == {}
                    fake.hold.set()  # type: ignore[union-attr]
                    rest = (await asyncio.wait_for(stream.read(), 5)).decode()
                    assert "[DONE]" in rest and "error" not in rest, rest

            run(scenario)


def test_the_keys_command_writes_the_pairs_and_never_overwrites(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from sglang_fair import cli

    assert cli.main(["keys", str(tmp_path / "k"), "--gateway-names", "gateway,gateway-b"]) == 0
    assert len(capsys.readouterr().out.split()) == 6 and gateway_keys(tmp_path / "k", "gateway-b")
    assert (tmp_path / "k" / "server.key_secret").stat().st_mode & 0o077 == 0
    assert cli.main(["keys", str(tmp_path / "k")]) == 2
    assert "keys exist already" in capsys.readouterr().err
    assert cli.main(["keys", str(tmp_path / "j"), "--gateway-names", "router"]) == 2
