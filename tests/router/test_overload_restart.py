"""The router's per-client bound (429, nothing charged) and a restarted router learning the
requests its workers already hold, so a later worker death fails them instead of losing them."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import zmq

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.routing.clients import ClientOverLimit
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import service
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode
from sglang_fair_router.config import ServiceConfig
from sglang_fair_router.fake_worker import FakeWorker
from sglang_fair_router.service import RouterService
from sglang_fair_router.state import RouterState

pytestmark = pytest.mark.timers


def submit(s: RouterState, rid: str, client: str) -> int:
    return s.submit(fm.Submit(rid, client, pack_tokens([1, 2, 3])), 0.0)


def test_a_client_over_the_routers_limit_is_refused_and_charged_nothing() -> None:
    s = RouterState(make_routing_policy(RouterConfig("d2lpm", num_workers=2)), 3.0, client_max_inflight=2)
    worker = submit(s, "f0", "flood")
    submit(s, "f1", "flood")
    charged = s.policy.counter_view()
    with pytest.raises(ClientOverLimit, match="'flood' already has 2 requests in flight"):
        submit(s, "f2", "flood")
    assert s.policy.counter_view() == charged and "f2" not in s.inflight and s.counts["refused"] == 1
    submit(s, "l0", "light")  # another client is not affected
    s.feedback(wm.Finished(worker, "f0", 4), 1.0)
    submit(s, "f3", "flood")  # room again once one finished
    assert s.counts["dispatched"] == 4


def test_no_limit_by_default() -> None:
    s = RouterState(make_routing_policy(RouterConfig("round_robin", num_workers=1)), 3.0)
    for i in range(5000):
        submit(s, f"r{i}", "one")
    assert len(s.inflight) == 5000


class Cluster:
    """Fake workers that hold what they get, a router on ipc endpoints, a frontend's two sockets."""

    def __init__(self, tmp: Path, **service: float) -> None:
        ep = lambda name: f"ipc://{tmp / name}"  # noqa: E731
        self.cfg = ServiceConfig(  # type: ignore[arg-type]
            frontend=ep("front"), failures=ep("fail"), feedback=ep("fb"), workers=f"{ep('w0')},{ep('w1')}",
            heartbeat_timeout=1.0, **service)
        self.workers = [FakeWorker(i, e, self.cfg.feedback, heartbeat_s=0.1)
                        for i, e in enumerate(self.cfg.worker_endpoints())]
        for w in self.workers:
            w.answer = False
            w.start()
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.front, self.fails = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
        self.front.setsockopt(zmq.LINGER, 0)
        self.fails.setsockopt(zmq.LINGER, 0)
        self.front.connect(self.cfg.frontend)
        self.fails.connect(self.cfg.failures)
        self.start_router()

    def start_router(self) -> None:
        policy = make_routing_policy(RouterConfig("round_robin", num_workers=2))
        self.service = RouterService(self.cfg, policy)
        self.thread = threading.Thread(target=self.service.serve_forever, kwargs={"poll_ms": 10}, daemon=True)
        self.thread.start()

    def stop_router(self) -> None:
        self.service.stop()
        self.thread.join(5)

    def failed(self, want: int, timeout: float) -> dict[str, fm.Failed]:
        got: dict[str, fm.Failed] = {}
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            if self.fails.poll(20):
                msg = fm.decode_failed(self.fails.recv())
                got[msg.rid] = msg
        return got

    def close(self) -> None:
        self.stop_router()
        for w in self.workers:
            w.stop()
            w.join(5)
        self.front.close(0)
        self.fails.close(0)


def test_the_routers_bound_answers_429_over_sockets(tmp_path: Path) -> None:
    c = Cluster(tmp_path, client_max_inflight=3)
    try:
        for i in range(6):
            c.front.send_multipart([encode(fm.Submit(f"f{i}", "flood", pack_tokens([i, 1]))), b"p"])
        c.front.send_multipart([encode(fm.Submit("l0", "light", pack_tokens([9, 9]))), b"p"])
        failed = c.failed(3, timeout=10)
        assert sorted(failed) == ["f3", "f4", "f5"] and {m.status for m in failed.values()} == {429}
        deadline = time.monotonic() + 5
        while len({r for w in c.workers for r, _ in w.received}) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert {r for w in c.workers for r, _ in w.received} == {"f0", "f1", "f2", "l0"}
    finally:
        c.close()


@pytest.mark.parametrize("announce", [True, False])
def test_a_restarted_router_fails_what_a_dead_worker_held(tmp_path: Path, announce: bool) -> None:
    """announce=False is the negative control: workers that do not answer ``Hello`` (the old
    protocol): the restarted router never learns their requests, and worker 0's death fails none."""
    c = Cluster(tmp_path)
    try:
        for w in c.workers:
            w.answer_hello = announce
        for i in range(6):
            c.front.send_multipart([encode(fm.Submit(f"r{i}", "c", pack_tokens([i, 1]))), b"p"])
        deadline = time.monotonic() + 5
        while sum(len(w.held) for w in c.workers) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        c.stop_router()  # the router dies with 6 requests in flight...
        c.start_router()  # ...and comes back empty
        deadline = time.monotonic() + 3
        while c.service.state.counts["resynced"] < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.service.state.counts["resynced"] == (6 if announce else 0)
        held_by_0 = set(c.workers[0].held)
        c.workers[0].alive = False  # worker 0 dies later: silent for 1 s
        failed = c.failed(len(held_by_0), timeout=5 if announce else 2.5)
        if announce:
            assert set(failed) == held_by_0 and all("stopped answering" in m.reason for m in failed.values())
            assert c.service.state.policy.queue[1] == len(c.workers[1].held)  # the live one's, still known
        else:
            assert failed == {}  # lost silently: what the re-announcement closes
    finally:
        c.close()


@pytest.mark.parametrize("asks", [service.HELLO_ASKS, 1])
def test_a_lost_holding_is_asked_for_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           asks: int) -> None:
    """Each worker loses its first answer (its feedback socket was reconnecting): the router asks
    again once it hears from the worker. asks=1 is the negative control: asked once, never resynced."""
    monkeypatch.setattr(service, "HELLO_ASKS", asks)
    c = Cluster(tmp_path)
    try:
        for i in range(4):
            c.front.send_multipart([encode(fm.Submit(f"r{i}", "c", pack_tokens([i, 1]))), b"p"])
        deadline = time.monotonic() + 5
        while sum(len(w.held) for w in c.workers) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        c.stop_router()
        for w in c.workers:
            w.lose_holdings = 1
        c.start_router()
        deadline = time.monotonic() + 3
        while c.service.state.counts["resynced"] < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.service.state.counts["resynced"] == (4 if asks > 1 else 0)
        assert all(w.lose_holdings == 0 for w in c.workers)  # the precondition: each lost one answer
    finally:
        c.close()


def test_an_answer_to_an_earlier_routers_hello_is_ignored(tmp_path: Path) -> None:
    """A Holding still queued for the previous router run (it names that run) resyncs nothing; the
    answer naming this run counts, and answers the ask."""
    c = Cluster(tmp_path)
    for w in c.workers:
        w.answer_hello = False
    c.stop_router()
    c.start_router()
    push = zmq.Context.instance().socket(zmq.PUSH)  # connected to this run only: nothing lost on the way
    push.setsockopt(zmq.LINGER, 0)
    push.connect(c.cfg.feedback)
    try:
        runs = ("an-earlier-run", c.service.run_id)
        c.workers[0].held.update(f"{run}-r" for run in runs)  # so its heartbeats do not reconcile them away
        for run in runs:
            push.send(encode(wm.Holding(0, [f"{run}-r"], ["c"], run)))
        deadline = time.monotonic() + 3
        while c.service.state.counts["resynced"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert set(c.service.state.inflight) == {f"{c.service.run_id}-r"}
        assert c.service.state.counts["ignored_feedback"] >= 1 and 0 not in c.service.unanswered
    finally:
        push.close(0)
        c.close()
