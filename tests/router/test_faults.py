"""Router faults: a stalled worker cannot block the loop; lost ``Finished`` notices are
reconciled with the workers' heartbeats; neither path loses a request silently."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import zmq
from test_service import Rig

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode
from sglang_fair_router.config import ServiceConfig
from sglang_fair_router.fake_worker import FakeWorker
from sglang_fair_router.service import RouterService
from sglang_fair_router.state import SETTLE_S, RouterState

pytestmark = pytest.mark.timers

BACKLOG = 50


def test_a_stalled_worker_does_not_block_the_router(tmp_path: Path) -> None:
    """Worker 1 never reads (nobody binds its endpoint: ZMQ queues 1,000 messages, then refuses).
    The old blocking send stopped the loop there, and worker 0 starved with it."""
    ep = lambda name: f"ipc://{tmp_path / name}"  # noqa: E731
    cfg = ServiceConfig(frontend=ep("front"), failures=ep("fail"), feedback=ep("fb"),
                        workers=f"{ep('w0')},{ep('w1')}", heartbeat_timeout=60.0, send_backlog=BACKLOG)
    live = FakeWorker(0, ep("w0"), cfg.feedback, heartbeat_s=0.1)
    live.start()
    service = RouterService(cfg, make_routing_policy(RouterConfig("round_robin", num_workers=2)))
    thread = threading.Thread(target=service.serve_forever, kwargs={"poll_ms": 10}, daemon=True)
    thread.start()
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    front, fails = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    front.connect(cfg.frontend)
    fails.connect(cfg.failures)
    n = 2 * (1000 + BACKLOG + 100)
    try:
        for i in range(n):
            front.send_multipart([encode(fm.Submit(f"r{i}", "c", pack_tokens([1, 2, i]))), b"p"])
        failed: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(live.received) < n // 2:
            while fails.poll(10):
                msg = fm.decode_failed(fails.recv())
                failed[msg.rid] = msg.reason
        assert len(live.received) == n // 2  # the live worker got all of its share
        while fails.poll(200):
            msg = fm.decode_failed(fails.recv())
            failed[msg.rid] = msg.reason
        assert len(failed) >= 100 and all(int(rid[1:]) % 2 == 1 for rid in failed)  # worker 1's only
        assert all("worker 1 is not taking requests" in reason for reason in failed.values())
        state = service.state
        assert state.counts["dispatched"] == n and state.counts["failed"] == len(failed)
        assert state.policy.queue[1] == n // 2 - len(failed)  # waiting in ZMQ or the backlog, none lost
        deadline = time.monotonic() + 5  # the view is refreshed twice a second
        while service.snapshot["workers"][1]["send_backlog"] != BACKLOG and time.monotonic() < deadline:
            time.sleep(0.05)
        assert service.snapshot["workers"][1]["send_backlog"] == BACKLOG
    finally:
        service.stop()
        thread.join(5)
        live.stop()
        live.join(5)
        front.close(0)
        fails.close(0)


def state(workers: int = 1) -> RouterState:
    return RouterState(make_routing_policy(RouterConfig("round_robin", num_workers=workers)), 3.0)


def submit(s: RouterState, rid: str, now: float) -> int:
    return s.submit(fm.Submit(rid, "c", pack_tokens([1, 2, 3])), now)


def beat(s: RouterState, now: float, inflight: int, loops: int) -> None:
    s.feedback(wm.Heartbeat(0, loops, inflight=inflight, loops=loops), now)


def test_lost_finished_notices_are_reconciled_oldest_first() -> None:
    s = state()
    for i in range(4):
        submit(s, f"r{i}", now=0.0)
    beat(s, 1.5, inflight=4, loops=1)
    beat(s, 2.0, inflight=1, loops=2)  # r0..r2 finished, their notices lost; one low report: wait
    assert s.policy.queue[0] == 4
    beat(s, 2.5, inflight=1, loops=3)  # the second in a row: 3 lost
    assert s.policy.queue[0] == 1 and list(s.inflight) == ["r3"] and s.counts["reconciled"] == 3
    s.feedback(wm.Finished(0, "r3", 5), now=2.6)
    assert s.policy.queue[0] == 0 and s.inflight == {}


def test_dispatches_on_their_way_are_not_reconciled() -> None:
    s = state()
    beat(s, 0.0, inflight=0, loops=1)
    for i in range(3):
        submit(s, f"r{i}", now=0.5)
    beat(s, 1.0, inflight=0, loops=2)  # the worker has not polled them yet
    beat(s, 1.4, inflight=0, loops=3)
    assert s.counts["reconciled"] == 0 and s.policy.queue[0] == 3


def test_a_finished_notice_overtaken_by_a_heartbeat_is_not_reconciled() -> None:
    s = state()
    submit(s, "r0", now=0.0)
    beat(s, 1.5, inflight=1, loops=1)
    beat(s, 2.0, inflight=0, loops=2)  # r0 finished; its notice is still on its way...
    s.feedback(wm.Finished(0, "r0", 3), now=2.1)  # ...and arrives
    beat(s, 2.5, inflight=0, loops=3)
    assert s.counts["reconciled"] == 0 and s.counts["finished"] == 1 and s.counts["ignored_feedback"] == 0


def test_a_loop_that_does_not_turn_is_not_reconciled() -> None:
    """A long model step: the worker has not polled its inbox, so it cannot have counted the
    requests sent meanwhile; heartbeats still come (another thread), with the same loop count."""
    s = state()
    beat(s, 0.0, inflight=0, loops=1)
    for i in range(3):
        submit(s, f"r{i}", now=0.1)
    for t in range(1, 8):
        beat(s, float(t), inflight=0, loops=1)
    assert s.policy.queue[0] == 3 and s.counts["reconciled"] == 0
    assert SETTLE_S < 2.0


def test_a_worker_losing_notices_is_reconciled_over_real_sockets() -> None:
    rig = Rig(workers=1, policy="round_robin")
    try:
        rig.workers[0].lose_finished = True
        for i in range(5):
            rig.submit(f"r{i}", "c", [4] * 10 + [i])
        rig.wait(lambda: len(rig.received()) == 5)
        assert rig.service.state.policy.queue[0] == 5
        rig.wait(lambda: rig.service.state.policy.queue[0] == 0, timeout=2 * SETTLE_S + 5)
        assert rig.service.state.counts["reconciled"] == 5
    finally:
        rig.close()
