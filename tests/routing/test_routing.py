"""Routing policies on hand-built inputs."""

from __future__ import annotations

from routing_support import Q, router

from sglang_fair.routing import RouterConfig, make_routing_policy


def test_round_robin_and_shortest_queue() -> None:
    rr = router("round_robin")
    assert [rr.route(Q(i, "a")) for i in range(5)] == [0, 1, 2, 0, 1]
    assert rr.queue == [2, 2, 1]
    sq = router("shortest_queue")
    sq.queue = [3, 1, 1]
    assert sq.route(Q(0, "a")) == 1 and sq.route(Q(1, "a")) == 2
    sq.on_finish(0, "a", 5)
    assert sq.queue == [2, 2, 2]


def test_client_round_robin_is_per_client() -> None:
    crr = router("client_rr")
    got = [crr.route(Q(i, c)) for i, c in enumerate("aabab")]
    assert got == [0, 1, 0, 2, 1]


def test_cache_aware_exploits_match_then_balances_load() -> None:
    ca = router("cache_aware", workers=2, balance_abs_threshold=2, balance_rel_threshold=1.5)
    doc = list(range(100))
    assert ca.route(Q(0, "a", doc + [1])) == 0  # empty trees: smallest tree, lowest index
    assert ca.route(Q(1, "b", [7] * 50)) == 1  # no match: the worker with the smaller tree
    assert ca.route(Q(2, "a", doc + [2])) == 0  # 100/101 matched > 0.3: the matching worker
    assert ca.route(Q(3, "a", doc + [3])) == 0
    assert ca.queue == [3, 1]
    assert ca.route(Q(4, "a", doc + [4])) == 0  # max - min = 2, not > 2: still balanced
    assert ca.route(Q(5, "a", doc + [5])) == 1  # 4 - 1 > 2 and 4 > 1.5: imbalanced, least loaded


def test_preble_explores_below_threshold_and_exploits_above() -> None:
    pb = router("preble", workers=2, preble_threshold=0.5)
    pb.route(Q(0, "a", [1] * 10))
    pb.queue = [5, 0]
    assert pb.route(Q(1, "a", [1] * 10 + [2] * 5)) == 0  # 10/15 >= 0.5: exploit worker 0
    assert pb.route(Q(2, "a", [1] * 4 + [3] * 20)) == 1  # 4/24 < 0.5: explore the least loaded


def test_d2lpm_follows_algorithm_2() -> None:
    d2 = router("d2lpm", workers=3, quantum=100)
    doc = [9] * 60
    # New client: every q = 0, so G_avail is empty: refill all by Q^w; no match: least queued.
    assert d2.route(Q(0, "a", doc)) == 0
    assert d2.counters("a") == [100 - 60, 100, 100]
    # G = {0} holds the longest match and q[a][0] = 40 > 0: stay on worker 0 despite its queue.
    assert d2.route(Q(1, "a", doc + [1])) == 0
    assert d2.counters("a") == [40 - 61, 100, 100]
    # q[a][0] <= 0: worker 0 is unavailable, so the least-queued available worker gets it.
    assert d2.route(Q(2, "a", doc + [2])) == 1
    assert d2.queue == [2, 1, 0]
    d2.on_finish(0, "a", output_tokens=10)
    assert d2.counters("a")[0] == -21 - 20 and d2.queue == [1, 1, 0]
    # Both holders of the match are exhausted except worker 1 (q = 38): G ∩ G_avail = {1}.
    assert d2.route(Q(3, "a", doc + [3])) == 1
    # Eviction on worker 1 removes it from G; worker 2 is the only one left with credit... and
    # once every counter is <= 0, all are refilled by as many quanta as needed.
    d2.on_evict(1, doc, 0)
    assert d2.tree.longest_match(doc)[1] == {0}
    d2.counters("a")[:] = [-250.0, -30.0, -120.0]
    assert d2.route(Q(4, "a", doc)) == 1  # one round: [-150, 70, -20] -> worker 1 is the only one
    assert d2.counters("a") == [-150.0, 70.0 - 60, -20.0]


def test_d2lpm_counters_are_per_client() -> None:
    d2 = router("d2lpm", workers=2, quantum=50)
    d2.route(Q(0, "a", [1] * 40))
    assert d2.counters("b") == [0.0, 0.0]
    assert d2.route(Q(1, "b", [1] * 40)) == 0  # b may follow the shared prefix with its own credit
    assert d2.counters("b") == [10.0, 50.0]


def test_weighted_d2lpm_refills_by_quantum_times_weight() -> None:
    from sglang_fair.core.cost import CostModel

    cost = CostModel(client_weights={"gold": 2.0})
    d2 = make_routing_policy(RouterConfig("d2lpm", num_workers=2, quantum=50, cost=cost))
    d2.route(Q(0, "gold", [1] * 40))
    d2.route(Q(1, "plain", [2] * 40))
    assert d2.counters("gold") == [100.0 - 40, 100.0] and d2.counters("plain") == [50.0, 50.0 - 40]


def test_dead_workers_get_nothing_and_are_forgotten() -> None:
    for name in ("round_robin", "shortest_queue", "client_rr", "cache_aware", "preble", "d2lpm"):
        r = router(name, workers=3)
        r.route(Q(0, "a", [1] * 30))
        r.mark_dead(1)
        assert r.queue[1] == 0 and 1 not in r.tree.longest_match([1] * 30)[1]
        assert {r.route(Q(i, "a", [1] * 30)) for i in range(1, 12)} <= {0, 2}, name
        r.mark_alive(1)
        assert 1 in {r.route(Q(i, c, [i] * 5)) for i in range(12, 40) for c in "ab"}, name


def test_routing_with_every_worker_dead_raises() -> None:
    import pytest

    from sglang_fair.routing import NoWorkerError

    r = router("d2lpm", workers=1)
    r.mark_dead(0)
    with pytest.raises(NoWorkerError):
        r.route(Q(0, "a", [1]))


def test_capacity_is_learned_from_the_workers_load_reports() -> None:
    from sglang_fair.routing.base import DEFAULT_CAPACITY, WorkerLoad

    r = router("round_robin", workers=2)
    assert r.capacity == [DEFAULT_CAPACITY, DEFAULT_CAPACITY]
    r = router("round_robin", workers=2, worker_capacity=256)
    r.on_load(0, WorkerLoad(running=40, waiting=12))  # requests wait: the KV pool binds at 40
    r.on_load(1, WorkerLoad(running=10, waiting=0))  # nothing waits: at least what it runs
    assert r.capacity == [40, 256]
    r.on_load(0, WorkerLoad(running=55, waiting=0))  # shorter requests: it runs more
    assert r.capacity[0] == 55
    r.on_load(0, WorkerLoad(running=0, waiting=3))  # all waiting (a long prefill): never below 1
    assert r.capacity[0] == 1
    r.queue = [5, 64]
    assert (r.fill(0), r.fill(1)) == (5.0, 0.25)


def test_service_rate_is_the_mean_over_live_reporting_workers() -> None:
    from sglang_fair.routing.base import WorkerLoad

    r = router("round_robin", workers=3)
    assert r.service_rate() == 0.0
    r.on_load(0, WorkerLoad(1, 0, 1000.0))
    r.on_load(1, WorkerLoad(1, 0, 3000.0))
    r.on_load(2, WorkerLoad(1, 0, 0.0))  # not measured yet: left out
    assert r.service_rate() == 2000.0
    r.mark_dead(1)
    assert r.service_rate() == 1000.0


def test_a_reported_cap_is_the_capacity_until_the_worker_fills() -> None:
    from sglang_fair.routing.base import WorkerLoad

    r = router("round_robin", workers=1)
    r.on_load(0, WorkerLoad(running=3, waiting=0, max_running=256))
    assert r.capacity == [256]
    r.on_load(0, WorkerLoad(running=48, waiting=5, max_running=256))  # the KV pool binds first
    assert r.capacity == [48]
    r.on_load(0, WorkerLoad(running=20, waiting=0, max_running=256))  # known to fill: not back to 256
    assert r.capacity == [48]
