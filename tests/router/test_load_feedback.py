"""A worker's load across the worker -> router boundary: the versioned heartbeat field (version 6, with
``knee`` from version 7) and the capacity the router learns from it."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import MessageError, encode
from sglang_fair_router.state import RouterState


def beat(**fields: Any) -> bytes:
    return msgspec.msgpack.encode({"type": "heartbeat", "worker": 0, "seq": 1, **fields})


def test_the_load_travels_in_a_heartbeat_from_version_6() -> None:
    msg = wm.Heartbeat(1, 7, inflight=2, loops=3, load=wm.Load(40, 12, 5300.5, 256))
    assert wm.decode_feedback(encode(msg)) == msg and msg.v == wm.VERSION == 7
    assert wm.decode_feedback(beat(v=5)).load is None  # an older worker: no report
    old = wm.decode_feedback(beat(v=6, load={"running": 1, "waiting": 2})).load
    assert old is not None and old.knee == 0  # a version-6 worker does not measure it


@pytest.mark.parametrize("frame", [
    beat(v=5, load={"running": 1, "waiting": 0}),  # versions before 6 have no load
    beat(v=6, load={"running": -1, "waiting": 0}),
    beat(v=6, load={"running": 1, "waiting": 0, "service_rate": -5.0}),
    beat(v=6, load={"running": 1, "waiting": 0, "service_rate": 1e13}),  # beyond the bound
    beat(v=6, load={"running": 1}),  # waiting missing
    beat(v=6, load={"running": 1, "waiting": 2, "knee": 20}),  # knee is version 7's
    beat(v=7, load={"running": 1, "waiting": 2, "knee": -1}),
])
def test_bad_loads_are_refused(frame: bytes) -> None:
    with pytest.raises(MessageError):
        wm.decode_feedback(frame)


def test_the_router_learns_each_workers_capacity_from_its_heartbeats() -> None:
    s = RouterState(make_routing_policy(RouterConfig("fair_cache_aware", num_workers=2)), 3.0)
    s.feedback(wm.Heartbeat(0, 1, load=wm.Load(3, 0, 900.0, 256)), 0.0)
    s.feedback(wm.Heartbeat(1, 1, load=wm.Load(44, 9, 1100.0, 256)), 0.0)  # its KV pool binds at 44
    assert s.policy.capacity == [256, 44]
    assert s.policy.service_rate() == 1000.0
    s.feedback(wm.Heartbeat(0, 2), 0.5)  # a heartbeat without a report leaves what was learned
    view = s.snapshot()["workers"]
    assert [w["capacity"] for w in view] == [256, 44]
    assert view[1]["load"] == {"running": 44, "waiting": 9, "service_rate": 1100.0, "max_running": 256,
                               "knee": 0}
    s.feedback(wm.Heartbeat(0, 3, load=wm.Load(3, 0, 900.0, 256, knee=21)), 1.0)
    assert s.policy.capacity == [21, 21]  # its decode throughput stops growing at 21 of its 256 slots;
    # worker 1 has not measured its own: the others' (one model on like devices), not its 44
