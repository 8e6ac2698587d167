"""Router messages: round trips, and everything malformed is refused with a reason."""

from __future__ import annotations

import msgspec
import pytest

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import MessageError, encode

pytestmark = pytest.mark.timers


def test_round_trips() -> None:
    submit = fm.Submit("r1", "alice", pack_tokens([1, 2, 70_000]))
    assert fm.decode_inbound(encode(submit)) == submit
    assert fm.decode_inbound(encode(fm.Abort("r1"))) == fm.Abort("r1")
    assert fm.decode_failed(encode(fm.Failed("r1", "worker 0 died"))).reason == "worker 0 died"
    assert fm.decode_failed(encode(fm.Failed("r1", "over the limit", 429))).status == 429
    for msg in (wm.Finished(3, "r1", 17), wm.Heartbeat(2, 9, 4, 1),
                wm.Evicted(1, pack_tokens([4, 5]), 1), wm.Holding(0, ["r1", "r2"], ["a", "b"])):
        assert wm.decode_feedback(encode(msg)) == msg
    assert wm.decode_to_worker(encode(wm.Dispatch("r1"))) == wm.Dispatch("r1")
    assert wm.decode_to_worker(encode(wm.Hello())) == wm.Hello()


@pytest.mark.parametrize("frame", [
    b"\xc1garbage",
    msgspec.msgpack.encode({"type": "submit", "rid": "r", "client": "c"}),  # no input_ids
    msgspec.msgpack.encode({"type": "teleport", "rid": "r"}),  # unknown kind
    msgspec.msgpack.encode({"type": "submit", "rid": "", "client": "c", "input_ids": b"\0" * 4}),
    msgspec.msgpack.encode({"type": "submit", "rid": "r", "client": "c", "input_ids": b"\0" * 5}),
    msgspec.msgpack.encode({"type": "abort", "rid": "r", "v": fm.VERSION + 1}),  # a future version
    msgspec.msgpack.encode({"type": "abort", "rid": "r", "v": 1}),  # an old one
])
def test_bad_frontend_frames_are_refused(frame: bytes) -> None:
    with pytest.raises(MessageError):
        fm.decode_inbound(frame)


@pytest.mark.parametrize("frame", [
    msgspec.msgpack.encode({"type": "finished", "worker": -1, "rid": "r", "output_tokens": 1}),
    msgspec.msgpack.encode({"type": "finished", "worker": 0, "rid": "r", "output_tokens": 1, "v": 1}),  # old
    msgspec.msgpack.encode({"type": "evicted", "worker": 0, "tokens": b"\0\0\0", "start": 0}),
    msgspec.msgpack.encode({"type": "dispatch", "rid": "r"}),  # wrong direction
    msgspec.msgpack.encode({"type": "holding", "worker": 0, "rids": ["r"], "clients": []}),  # uneven
    msgspec.msgpack.encode({"type": "heartbeat", "worker": 0, "seq": 1, "v": 1}),  # before 2
])
def test_bad_feedback_frames_are_refused(frame: bytes) -> None:
    with pytest.raises(MessageError):
        wm.decode_feedback(frame)
