"""The prefill admission budget across the worker -> router boundary: the versioned
heartbeat field, the router's view of it, and ``pab`` routing in the real router process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.harness.server import free_ports
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import MessageError, encode
from sglang_fair_router.fake_worker import FakeWorker
from sglang_fair_router.state import RouterState

pytestmark = pytest.mark.timers

ROOT = Path(__file__).resolve().parents[2]


def beat(**fields: Any) -> bytes:
    return msgspec.msgpack.encode({"type": "heartbeat", "worker": 0, "seq": 1, **fields})


def test_the_budget_travels_in_a_heartbeat_from_version_4() -> None:
    msg = wm.Heartbeat(1, 7, inflight=2, loops=3, prefill_budget=-4096)
    assert wm.decode_feedback(encode(msg)) == msg and msg.v == wm.VERSION >= 4
    assert wm.decode_feedback(beat(v=4)).prefill_budget is None  # a worker that does not report


def test_a_version_2_heartbeat_is_read_without_a_budget() -> None:
    old = wm.decode_feedback(beat(v=2, inflight=1))
    assert isinstance(old, wm.Heartbeat) and old.prefill_budget is None and old.inflight == 1


@pytest.mark.parametrize("frame", [
    beat(v=2, prefill_budget=10),  # versions before 4 have no budget
    beat(v=3, prefill_budget=10),
    beat(v=4, prefill_budget=1.5),  # tokens are whole
    beat(v=4, prefill_budget=1 << 41),  # beyond the bound
    beat(v=4, prefill_budget="many"),
    beat(v=wm.VERSION + 1, prefill_budget=10),  # a future version
])
def test_bad_budgets_are_refused(frame: bytes) -> None:
    with pytest.raises(MessageError):
        wm.decode_feedback(frame)


def route(s: RouterState, rid: str, tokens: int) -> int:
    return s.submit(fm.Submit(rid, "c", pack_tokens([rid.__hash__() % 1000] * tokens)), 0.0)


def test_pab_routes_by_reports_and_decrements_its_view_until_the_next() -> None:
    s = RouterState(make_routing_policy(RouterConfig("pab", num_workers=2)), 3.0)
    s.feedback(wm.Heartbeat(0, 1, prefill_budget=1500), 0.0)
    s.feedback(wm.Heartbeat(1, 1, prefill_budget=1000), 0.0)
    assert [route(s, f"r{i}", 1000) for i in range(3)] == [0, 1, 0]  # 1500 -> 500; 1000 fits w1; none fits
    assert s.policy.budget == [-500, 0]  # type: ignore[attr-defined]
    s.feedback(wm.Heartbeat(1, 2, prefill_budget=4000), 0.1)  # the next report replaces the view
    assert route(s, "r3", 1000) == 1 and s.policy.budget == [-500, 3000]  # type: ignore[attr-defined]
    s.feedback(wm.Heartbeat(0, 2), 0.2)  # a heartbeat without a report leaves the view
    assert s.policy.budget[0] == -500  # type: ignore[attr-defined]
    assert [w["prefill_budget"] for w in s.snapshot()["workers"]] == [1500, 4000]


def test_other_policies_ignore_reports_and_a_dead_worker_forgets_its_budget() -> None:
    rr = RouterState(make_routing_policy(RouterConfig("round_robin", num_workers=2)), 3.0)
    rr.feedback(wm.Heartbeat(0, 1, prefill_budget=0), 0.0)
    rr.feedback(wm.Heartbeat(1, 1, prefill_budget=10**6), 0.0)
    assert [route(rr, f"r{i}", 100) for i in range(2)] == [0, 1]  # negative control: budget ignored
    s = RouterState(make_routing_policy(RouterConfig("pab", num_workers=2)), 1.0)
    s.feedback(wm.Heartbeat(0, 1, prefill_budget=-10), 0.0)
    s.feedback(wm.Heartbeat(1, 1, prefill_budget=10), 0.0)
    s.feedback(wm.Heartbeat(1, 2, prefill_budget=10), 1.5)
    s.check_liveness(2.0)  # worker 0 silent for 2 s: dead
    s.feedback(wm.Heartbeat(0, 3), 2.1)  # back, without a report yet: unbounded
    assert route(s, "r", 100) == 0


def test_the_router_process_routes_by_the_fake_workers_reports() -> None:
    """``sglang-fair router --router-policy pab`` with two fake workers: worker 0 reports no budget
    left, worker 1 room for every request; /state shows the reports; then worker 0 gets the room."""
    *ports, http = free_ports(6)  # distinct: a repeated port once sent a ZMQ greeting to the HTTP client
    ep = [f"tcp://127.0.0.1:{port}" for port in ports]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "python"), str(ROOT / "router")])}
    proc = subprocess.Popen([sys.executable, "-m", "sglang_fair.cli", "router", "--router-policy", "pab",
                             "--router-frontend", ep[0], "--router-failures", ep[1],
                             "--router-feedback", ep[2], "--router-workers", f"{ep[3]},{ep[4]}",
                             "--router-http-port", str(http)], env=env)
    workers = [FakeWorker(i, e, ep[2], heartbeat_s=0.05) for i, e in enumerate(ep[3:])]
    workers[0].prefill_budget, workers[1].prefill_budget = 0, 10_000
    front = zmq.Context.instance().socket(zmq.PUSH)
    front.setsockopt(zmq.LINGER, 0)
    try:
        for w in workers:
            w.start()
        front.connect(ep[0])
        state = wait_state(http, lambda st: [w["prefill_budget"] for w in st["workers"]] == [0, 10_000])
        assert state["policy"] == "pab"
        for i in range(8):
            front.send_multipart([encode(fm.Submit(f"a{i}", "c", pack_tokens([i] * 1000))), b"x"])
        wait_for(lambda: len(workers[1].received) == 8)
        assert workers[0].received == []
        workers[0].prefill_budget, workers[1].prefill_budget = 10_000, 0
        wait_state(http, lambda st: [w["prefill_budget"] for w in st["workers"]] == [10_000, 0])
        for i in range(4):
            front.send_multipart([encode(fm.Submit(f"b{i}", "c", pack_tokens([i] * 1000))), b"x"])
        wait_for(lambda: len(workers[0].received) == 4)
        assert len(workers[1].received) == 8
    finally:
        front.close(0)
        proc.terminate()
        proc.wait(10)
        for w in workers:
            w.stop()
            w.join(5)


def wait_for(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def wait_state(port: int, cond: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def ok() -> bool:
        nonlocal seen
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/state", timeout=2) as resp:
                seen = json.loads(resp.read())
        except OSError:
            return False
        return bool(cond(seen))

    wait_for(ok)
    return seen
