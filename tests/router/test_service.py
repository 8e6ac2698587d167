"""The router process over real ZMQ sockets with fake workers: dispatch, failures, bad input, HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zmq

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.harness.server import free_port, free_ports
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router.codec import encode
from sglang_fair_router.config import ServiceConfig
from sglang_fair_router.fake_worker import FakeWorker
from sglang_fair_router.http import serve_state
from sglang_fair_router.service import RouterService

pytestmark = pytest.mark.timers


class Rig:
    def __init__(self, workers: int, policy: str = "d2lpm",
                 clock: Callable[[], float] = time.monotonic, state_file: str = "") -> None:
        ep = [f"tcp://127.0.0.1:{port}" for port in free_ports(3 + workers)]
        self.cfg = ServiceConfig(frontend=ep[0], failures=ep[1], feedback=ep[2],
                                 workers=",".join(ep[3:]), heartbeat_timeout=1.0, state_file=state_file)
        self.workers = [FakeWorker(i, e, self.cfg.feedback, heartbeat_s=0.1, clock=clock)
                        for i, e in enumerate(self.cfg.worker_endpoints())]
        for w in self.workers:
            w.start()
        self.service = RouterService(self.cfg, make_routing_policy(RouterConfig(policy, num_workers=workers)),
                                     clock=clock)
        self.thread = threading.Thread(target=self.service.serve_forever, kwargs={"poll_ms": 10}, daemon=True)
        self.thread.start()
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.front = ctx.socket(zmq.PUSH)
        self.front.setsockopt(zmq.LINGER, 0)
        self.front.connect(self.cfg.frontend)
        self.fails = ctx.socket(zmq.PULL)
        self.fails.setsockopt(zmq.LINGER, 0)
        self.fails.connect(self.cfg.failures)

    def submit(self, rid: str, client: str, tokens: list[int]) -> None:
        self.front.send_multipart([encode(fm.Submit(rid, client, pack_tokens(tokens))), b"payload"])

    def received(self) -> set[str]:
        return {rid for w in self.workers for rid, _ in w.received}

    def wait(self, cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while not cond():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.02)

    def close(self) -> None:
        self.service.stop()
        self.thread.join(5)
        for w in self.workers:
            w.stop()
            w.join(5)
        self.front.close(0)
        self.fails.close(0)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig(workers=3)
    yield r
    r.close()


def test_requests_flow_to_workers_and_feedback_returns(rig: Rig) -> None:
    for i in range(30):
        rig.submit(f"r{i}", f"c{i % 3}", [i % 3] * 64 + [i])
    rig.wait(lambda: len(rig.received()) == 30)
    rig.wait(lambda: rig.service.state.counts["finished"] == 30)
    assert rig.service.state.inflight == {} and sum(rig.service.state.policy.queue) == 0


def test_malformed_messages_are_dropped_and_the_router_keeps_serving(rig: Rig) -> None:
    rig.front.send(b"\x00not msgpack")
    rig.front.send_multipart([encode(fm.Submit("lonely", "c", pack_tokens([1])))])  # payload missing
    rig.submit("ok", "c", [1, 2, 3])
    rig.wait(lambda: "ok" in rig.received())
    assert rig.service.state.counts["dropped"] == 2


def test_a_hung_worker_is_detected_and_its_requests_fail_none_hangs() -> None:
    rig = Rig(workers=3, policy="round_robin")
    try:
        _hung_worker_scenario(rig)
    finally:
        rig.close()


def test_liveness_works_when_the_clock_starts_at_zero() -> None:
    """Right after boot ``time.monotonic()`` is near zero: heartbeats, liveness checks and the
    hung-worker detection must not depend on it having grown large (here it starts at 0.0)."""
    start = time.monotonic()
    rig = Rig(workers=3, policy="round_robin", clock=lambda: time.monotonic() - start)
    try:
        _hung_worker_scenario(rig)
    finally:
        rig.close()


def _hung_worker_scenario(rig: Rig) -> None:
    rig.workers[1].answer = False  # requests sent there never finish...
    for i in range(9):
        rig.submit(f"r{i}", "c", [9] * 20 + [i])
    rig.wait(lambda: len(rig.received()) == 9)
    stuck = {rid for rid, _ in rig.workers[1].received}
    assert stuck
    rig.workers[1].alive = False  # ...and then it stops heartbeating
    failed = set()
    deadline = time.monotonic() + 10
    while failed != stuck and time.monotonic() < deadline:
        if rig.fails.poll(100):
            failed.add(fm.decode_failed(rig.fails.recv()).rid)
    assert failed == stuck  # every request either completed or got an error
    assert 1 not in rig.service.state.policy.alive
    rig.submit("after", "c", [9] * 20)
    rig.wait(lambda: "after" in rig.received())
    assert all(rid != "after" for rid, _ in rig.workers[1].received)


def test_state_endpoint_serves_json_and_prometheus(rig: Rig) -> None:
    rig.submit("r0", "alice", [5] * 10)
    rig.wait(lambda: rig.service.state.counts["finished"] == 1)
    rig.wait(lambda: rig.service.snapshot["counts"]["finished"] == 1)
    port = free_port()
    server = serve_state(port, lambda: rig.service.snapshot)
    try:
        state = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/state", timeout=5))
        assert state["policy"] == "d2lpm" and len(state["workers"]) == 3 and "alice" in state["deficits"]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert 'sglang_fair_router_deficit{client="alice",worker="0"}' in text
        assert "sglang_fair_router_worker_queue" in text
    finally:
        server.shutdown()


def test_the_state_file_follows_the_view_for_serves_main_port(tmp_path: Path) -> None:
    """``serve`` answers ``GET /fairness/router`` from this file (``router_view.py``): it exists from
    the start and follows the state as the loop refreshes its view."""
    path = tmp_path / "state.json"
    rig = Rig(workers=2, state_file=str(path))
    try:
        assert json.loads(path.read_text())["counts"]["finished"] == 0
        rig.submit("r0", "alice", [5] * 10)
        rig.wait(lambda: json.loads(path.read_text())["counts"]["finished"] == 1)
        written = json.loads(path.read_text())
        assert "alice" in written["deficits"] and len(written["workers"]) == 2
        assert "submit_to_dispatch_us" in written and not (tmp_path / "state.json.tmp").exists()
    finally:
        rig.close()
