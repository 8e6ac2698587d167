"""The SGLang side of the router boundary over real ZMQ sockets, with SGLang's own message classes:
the controller's frontend (Submit, Abort, Failed -> 503 abort) and the worker link (Dispatch,
Cancel, Finished, Heartbeat, Evicted from KV events)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")

import zmq
from plugin_support import FakeReq

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.sglang_plugin import worker_hooks
from sglang_fair.sglang_plugin.controller_hooks import RouterFrontend
from sglang_fair.sglang_plugin.router_link import RouterLink, decode_payload, encode_payload
from sglang_fair.sglang_plugin.worker_hooks import EvictionPublisher, WorkerLink
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode

pytestmark = pytest.mark.sglang

CTX: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()


def sock(kind: int, endpoint: str, bind: bool) -> zmq.Socket[bytes]:
    s = CTX.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVTIMEO, 5000)
    (s.bind if bind else s.connect)(endpoint)
    return s


def drain(feedback: zmq.Socket[bytes]) -> list[Any]:
    """Feedback received so far, heartbeats left out."""
    out = []
    while True:
        try:
            msg = wm.decode_feedback(feedback.recv(zmq.NOBLOCK))
        except zmq.Again:
            return out
        if not isinstance(msg, wm.Heartbeat):
            out.append(msg)


@pytest.fixture()
def link(tmp_path: Path) -> RouterLink:
    return RouterLink(str(tmp_path), num_workers=2, heartbeat_interval=0.05)


def abort_req(rid: str) -> Any:
    from sglang.srt.managers.io_struct import AbortReq

    return AbortReq(rid=rid)


def test_worker_link_turns_dispatch_and_cancel_into_sglang_requests(link: RouterLink) -> None:
    feedback = sock(zmq.PULL, link.feedback, bind=True)
    worker = WorkerLink(link, rank=1)
    router = sock(zmq.PUSH, link.worker(1), bind=False)
    router.send_multipart([encode(wm.Dispatch("r1")), encode_payload(abort_req("r1"))])
    router.send(encode(wm.Cancel("r1")))
    router.send(b"not msgpack")  # logged and dropped
    router.send_multipart([encode(wm.Dispatch("r2")), encode_payload(abort_req("other"))])
    got: list[Any] = []
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        worker.poll(got)
        time.sleep(0.01)
    assert [(type(x).__name__, x.rid) for x in got] == [("AbortReq", "r1"), ("AbortReq", "r1")]
    assert worker.routed == {"r1": "default"}  # r2's payload named another rid: dropped
    beats: list[Any] = []
    while not beats or beats[-1].loops < worker.loops:  # the heartbeat thread reports the loop's count
        beats.append(wm.decode_feedback(feedback.recv()))
    assert all(isinstance(b, wm.Heartbeat) and b.worker == 1 for b in beats)
    assert [b.seq for b in beats] == list(range(1, len(beats) + 1)) and beats[-1].inflight == 1

    req = FakeReq("r1", "alice", [1, 2], output_ids=[5, 6, 7], done=True)
    worker.finished(req, aborted=False)
    worker.finished(req, aborted=False)  # once only
    time.sleep(0.2)  # heartbeats go on meanwhile
    notices = drain(feedback)
    assert notices == [wm.Finished(worker=1, rid="r1", output_tokens=3)]


def test_a_worker_answers_a_routers_hello_with_what_it_holds(link: RouterLink) -> None:
    feedback = sock(zmq.PULL, link.feedback, bind=True)
    worker = WorkerLink(link, rank=0)
    router = sock(zmq.PUSH, link.worker(0), bind=False)
    router.send_multipart([encode(wm.Dispatch("r7")), encode_payload(abort_req("r7"))])
    router.send(encode(wm.Hello()))  # a router (re)started
    got: list[Any] = []
    notices: list[Any] = []
    deadline = time.monotonic() + 5
    while not notices and time.monotonic() < deadline:  # the Hello may come a poll after the Dispatch
        worker.poll(got)
        time.sleep(0.01)
        notices += drain(feedback)
    assert [x.rid for x in got] == ["r7"]  # the Hello itself is no request for SGLang
    time.sleep(0.1)
    notices += drain(feedback)
    assert notices == [wm.Holding(worker=0, rids=["r7"], clients=["default"])]  # no routing_key: default


def test_eviction_publisher_reports_removed_pages_as_token_paths(link: RouterLink,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from sglang.srt.disaggregation.kv_events import (
        AllBlocksCleared,
        BlockRemoved,
        BlockStored,
        KVEventBatch,
    )

    feedback = sock(zmq.PULL, link.feedback, bind=True)
    monkeypatch.setattr(worker_hooks, "_LINK", WorkerLink(link, rank=0))
    publisher = EvictionPublisher(attn_dp_rank=0, endpoint="")
    stored = BlockStored(block_hashes=[1, 2], parent_block_hash=None, token_ids=[7, 8, 9, 10],
                         block_size=2, lora_id=None, medium="GPU")
    host = BlockRemoved(block_hashes=[1], medium="CPU_PINNED")  # another tier: not ours
    publisher.publish(KVEventBatch(ts=0.0, events=[stored, host, BlockRemoved(block_hashes=[2])]))
    time.sleep(0.2)
    assert drain(feedback) == [wm.Evicted(worker=0, tokens=pack_tokens([7, 8, 9, 10]), start=2)]
    publisher.publish(KVEventBatch(ts=1.0, events=[AllBlocksCleared()]))
    time.sleep(0.2)
    assert drain(feedback) == [wm.Evicted(worker=0, tokens=pack_tokens([7, 8]), start=0)]


def test_heartbeats_carry_the_schedulers_load(link: RouterLink, monkeypatch: pytest.MonkeyPatch) -> None:
    feedback = sock(zmq.PULL, link.feedback, bind=True)
    monkeypatch.setattr(worker_hooks, "_LINK", WorkerLink(link, rank=1))
    running, prefilled = [object() for _ in range(2)], [object()]
    scheduler = SimpleNamespace(running_batch=SimpleNamespace(reqs=running), waiting_queue=[4, 5],
                                max_running_requests=8)

    def heard() -> wm.Load | None:
        deadline, load = time.monotonic() + 5, None
        while load is None and time.monotonic() < deadline:
            msg = wm.decode_feedback(feedback.recv())  # within RCVTIMEO; a heartbeat every 0.05 s
            load = msg.load if isinstance(msg, wm.Heartbeat) else None
        return load

    worker_hooks.report_load(scheduler, 1234.5, SimpleNamespace(reqs=[*running, *prefilled]))  # a mixed batch
    assert heard() == wm.Load(running=3, waiting=2, service_rate=1234.5, max_running=8)
    knee = worker_hooks.knee_of(scheduler)
    for i in range(64):  # decode steps of 1-16 requests at 3 ms + 1 ms a request: knee 3 x 3 = 9
        knee.observe(1 + i % 16, 100 * (1 + i % 16), 0.003 + 0.001 * (1 + i % 16))
    worker_hooks.report_load(scheduler, 1234.5)
    while (load := heard()) is not None and load.knee == 0:
        pass
    assert load == wm.Load(running=2, waiting=2, service_rate=1234.5, max_running=8, knee=9)


def fake_controller(tokenizer_ipc: str) -> SimpleNamespace:
    sent: list[tuple[str, Any]] = []
    return SimpleNamespace(
        sent=sent, port_args=SimpleNamespace(tokenizer_ipc_name=tokenizer_ipc),
        round_robin_scheduler=lambda req: sent.append(("round_robin", req)),
        send_control_message=lambda obj: sent.append(("control", obj)),
        maybe_external_dp_rank_routing=lambda req: getattr(req, "routed_dp_rank", None) is not None,
    )


def test_frontend_submits_aborts_and_relays_failures_as_503(link: RouterLink, tmp_path: Path) -> None:
    from sglang.srt.managers.io_struct import sock_recv

    tokenizer_ipc = f"ipc://{tmp_path}/tokenizer"
    router_in = sock(zmq.PULL, link.frontend, bind=True)
    failures = sock(zmq.PUSH, link.failures, bind=True)
    tokenizer = sock(zmq.PULL, tokenizer_ipc, bind=True)
    controller = fake_controller(tokenizer_ipc)
    frontend = RouterFrontend(link, controller)

    req = SimpleNamespace(rid="r1", routing_key="alice", input_ids=[3, 4, 5], routed_dp_rank=None)
    frontend.dispatch(req)
    header, payload = router_in.recv_multipart()
    assert fm.decode_inbound(header) == fm.Submit("r1", "alice", pack_tokens([3, 4, 5]))
    assert vars(decode_payload(payload)) == vars(req)
    frontend.dispatch(SimpleNamespace(rid="r2", routing_key=None, input_ids=None, routed_dp_rank=None))
    assert controller.sent[-1][0] == "round_robin"  # no token ids: SGLang's round robin

    frontend.on_control(abort_req("r1"))
    assert fm.decode_inbound(router_in.recv()) == fm.Abort("r1")
    assert controller.sent[-1] == ("control", abort_req("r1"))  # and SGLang's broadcast too

    failures.send(encode(fm.Failed("r1", "worker 1 stopped answering")))
    notice = sock_recv(tokenizer)
    assert type(notice).__name__ == "AbortReq" and notice.rid == "r1"
    assert notice.finished_reason["status_code"] == 503
    assert "stopped answering" in notice.finished_reason["message"]
    failures.send(encode(fm.Failed("r3", "client 'alice' already has 8 requests in flight", 429)))
    notice = sock_recv(tokenizer)
    assert notice.rid == "r3" and notice.finished_reason["status_code"] == 429
    assert notice.finished_reason["err_type"] == "TooManyRequests"
