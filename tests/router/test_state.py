"""The router's decisions with a fake clock: dispatch, feedback, failures, restarts."""

from __future__ import annotations

import pytest

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.state import RouterState

pytestmark = pytest.mark.timers


def state(workers: int = 2, policy: str = "d2lpm") -> RouterState:
    return RouterState(make_routing_policy(RouterConfig(policy, num_workers=workers, quantum=100)),
                       heartbeat_timeout=2.0)


def submit(rid: str, client: str = "a", tokens: list[int] | None = None) -> fm.Submit:
    return fm.Submit(rid, client, pack_tokens(tokens or [1] * 40))


def test_dispatch_then_finish_applies_algorithm_2() -> None:
    s = state()
    w = s.submit(submit("r1"), now=0.1)
    assert s.policy.queue[w] == 1 and s.policy.deficits["a"][w] == 100 - 40  # type: ignore[attr-defined]
    s.feedback(wm.Finished(w, "r1", 10), now=0.2)
    assert s.policy.queue[w] == 0 and s.policy.deficits["a"][w] == 60 - 20  # type: ignore[attr-defined]
    assert s.inflight == {}


def test_unknown_or_duplicate_feedback_changes_nothing() -> None:
    s = state()
    w = s.submit(submit("r1"), now=0.0)
    s.feedback(wm.Finished(w, "r1", 10), now=0.1)
    before = (list(s.policy.queue), [list(q) for q in s.policy.deficits.values()])  # type: ignore[attr-defined]
    s.feedback(wm.Finished(w, "r1", 10), now=0.2)  # duplicate
    s.feedback(wm.Finished(w, "ghost", 10), now=0.2)  # never dispatched (e.g. router restarted)
    s.feedback(wm.Finished(7, "r9", 10), now=0.2)  # no such worker
    after = (list(s.policy.queue), [list(q) for q in s.policy.deficits.values()])  # type: ignore[attr-defined]
    assert before == after and s.counts["ignored_feedback"] == 3


def test_eviction_feedback_prunes_the_tree() -> None:
    s = state(policy="cache_aware")
    w = s.submit(submit("r1", tokens=[3] * 10), now=0.0)
    s.feedback(wm.Evicted(w, pack_tokens([3] * 10), 4), now=0.1)
    assert s.policy.tree.longest_match([3] * 10) == (4, frozenset({w}))


def test_silent_worker_is_declared_dead_and_its_requests_fail() -> None:
    s = state(workers=2, policy="round_robin")
    assert [s.submit(submit(f"r{i}"), now=0.0) for i in range(4)] == [0, 1, 0, 1]
    s.feedback(wm.Heartbeat(0, 1), now=1.5)
    assert s.check_liveness(now=1.9) == []
    failed = s.check_liveness(now=2.5)  # worker 1 silent for 2.5 s > 2 s
    assert sorted(rid for rid, _ in failed) == ["r1", "r3"]
    assert all("worker 1 stopped answering" in reason for _, reason in failed)
    assert s.policy.alive == [0] and s.submit(submit("r5"), now=2.6) == 0
    s.feedback(wm.Heartbeat(1, 5), now=3.0)  # it came back: usable again, as an empty worker
    assert s.policy.alive == [0, 1]


def test_a_worker_never_heard_from_is_dead_only_once_it_has_work() -> None:
    s = state(workers=2, policy="round_robin")
    assert s.check_liveness(now=100.0) == [] and s.policy.alive == [0, 1]  # still starting: fine
    assert s.submit(submit("r1"), now=100.0) == 0  # its silence counts from here
    assert s.check_liveness(now=101.0) == []
    assert [rid for rid, _ in s.check_liveness(now=102.5)] == ["r1"] and s.policy.alive == [1]


def test_a_worker_whose_loop_stands_still_with_work_is_dead() -> None:
    s = RouterState(make_routing_policy(RouterConfig("round_robin", num_workers=2)), heartbeat_timeout=2.0,
                    stall_timeout=10.0)
    s.submit(submit("r0"), now=0.0)  # to worker 0
    for t in range(30):  # both keep beating; worker 0's loop stops at t = 5, worker 1 is idle
        s.feedback(wm.Heartbeat(0, t + 1, inflight=1, loops=min(t, 5)), now=float(t))
        s.feedback(wm.Heartbeat(1, t + 1, loops=0), now=float(t))
        failed = s.check_liveness(now=float(t))
        if t <= 15:  # within 10 s of its last step
            assert failed == [], t
        else:
            assert [rid for rid, _ in failed] == ["r0"] and "stuck" in failed[0][1]
            break
    assert s.policy.alive == [1]  # the idle worker whose loop never moved is fine


def test_all_workers_dead_raises_no_worker() -> None:
    import pytest

    from sglang_fair.routing import NoWorkerError

    s = state(workers=1)
    s.feedback(wm.Heartbeat(0, 1), now=0.0)
    s.check_liveness(now=10.0)
    with pytest.raises(NoWorkerError):
        s.submit(submit("r1"), now=10.0)


def test_snapshot_shows_tree_queues_and_counters() -> None:
    s = state()
    s.submit(submit("r1", "alice"), now=0.0)
    snap = s.snapshot()
    assert snap["policy"] == "d2lpm" and snap["tree_tokens"] == 40 and snap["inflight"] == 1
    assert [w["queue"] for w in snap["workers"]] == [1, 0]
    assert [w["hit_estimate"] for w in snap["workers"]] == [0.0, None]
    assert [w["reported_inflight"] for w in snap["workers"]] == [None, None]  # no heartbeat yet
    s.feedback(wm.Heartbeat(0, 1, inflight=1), now=0.05)
    assert s.snapshot()["workers"][0]["reported_inflight"] == 1
    s.submit(submit("r2", "alice", [1] * 40 + [2] * 10), now=0.1)  # 40 of its 50 tokens are there
    assert s.snapshot()["workers"][0]["hit_estimate"] == 40 / 90
    assert snap["deficits"]["alice"] == [60.0, 100.0]
