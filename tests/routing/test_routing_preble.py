"""Preble's E2 routing (routing/preble.py) on hand-built inputs."""

from __future__ import annotations

import pytest
from routing_support import Q, router

from sglang_fair.routing.preble import REBALANCE_AFTER, Preble


def preble(workers: int = 2, **kw: float) -> Preble:
    pb = router("preble", workers=workers, **kw)
    assert isinstance(pb, Preble)
    return pb


def test_exploit_goes_to_the_least_loaded_holder_of_the_longest_match() -> None:
    pb = preble(workers=3)
    doc = list(range(100))
    assert pb.route(Q(0, "a", doc + [1])) == 0 and pb.last_decision == "explore"  # empty: all cost 101
    assert pb.route(Q(1, "b", [7] * 50)) == 1  # explore: worker 0 carries 101, 1 and 2 nothing
    assert pb.load(0) == 101 and pb.load(1) == 50 and pb.load(2) == 0
    # 100/102 cached on worker 0 >= 0.5: exploit, although worker 2 is idle.
    assert pb.route(Q(2, "a", doc + [2, 3])) == 0 and pb.last_decision == "exploit"
    assert pb.load(0) == 101 + 2  # only the two uncached tokens are charged
    pb.tree.insert(doc, 2)  # worker 2 holds the document too: the lighter holder wins
    assert pb.route(Q(3, "a", doc + [4])) == 2 and pb.last_decision == "exploit"


def test_explore_weighs_load_against_the_prefill_a_partial_match_saves() -> None:
    pb = preble(workers=2)
    pb.route(Q(0, "a", [5] * 40))  # worker 0: load 40, holds 40 tokens
    req = [5] * 40 + [6] * 60  # 40/100 < 0.5: explore
    # worker 0: 40 + 60 = 100; worker 1: 0 + 100 = 100: a tie, lowest index; a threshold-then-least-
    # loaded router would send it to worker 1.
    assert pb.route(Q(1, "a", req)) == 0 and pb.last_decision == "explore"
    pb2 = preble(workers=2)
    pb2.route(Q(0, "a", [5] * 40))
    pb2.route(Q(1, "b", [9] * 30))  # worker 1: load 30, no match for req
    # worker 0: 40 + 60 = 100 < worker 1: 30 + 100 = 130
    assert pb2.route(Q(2, "a", req)) == 0
    pb3 = preble(workers=2)
    pb3.route(Q(0, "a", [5] * 40))
    pb3.route(Q(1, "a", [8] * 80))  # explore: worker 1 (0 + 80 < 40 + 80); worker 0 now 40, worker 1 80
    pb3.on_finish(1, "a", 0)
    pb3.route(Q(2, "a", [5] * 40 + [3] * 200))  # 40/240: explore; w0: 40 + 200 = 240 < w1: 80 + 240
    assert pb3.load(0) == 240 and pb3.load(1) == 80


def test_decode_estimate_and_window() -> None:
    pb = preble(workers=2, preble_window=3)
    pb.route(Q(0, "a", [1] * 10))  # w0
    pb.route(Q(1, "b", [2] * 10))  # w1
    pb.on_finish(0, "a", 20)  # mean output 20 -> decode estimate w_q * 20 = 40 per dispatch
    assert pb.load(0) == 10 + 40 and pb.load(1) == 10 + 40
    pb.route(Q(2, "c", [3] * 5))  # explore: w0 50 + 5, w1 50 + 5: tie -> w0
    pb.route(Q(3, "d", [4] * 5))  # window of 3: the first dispatch (w0, 10) leaves
    assert len(pb.history) == 3
    assert pb.window_count == [1, 2] and pb.window_prefill == [5.0, 15.0]


def test_rebalance_redirects_an_exploit_from_an_overloaded_holder() -> None:
    for balance, expect in ((1.5, 1), (1e9, 0)):
        pb = preble(workers=2, preble_balance=balance)
        doc = [9] * 100
        pb.route(Q(0, "a", doc))
        for i in range(1, REBALANCE_AFTER - 1):
            pb.route(Q(i, "a", doc + [i]))  # exploit on worker 0 although worker 1 is idle: < 50 routed
        assert {w for w, _ in pb.history} == {0} and pb.routed == REBALANCE_AFTER - 1
        assert pb.route(Q(900, "b", [3] * 30)) == 1  # explore: 0 + 30 < 148 + 30
        assert pb.load(0) == 148 and pb.load(1) == 30
        # 148 >= 1.5 x 30: the exploit is redirected to the lightest worker (not with a huge ratio).
        assert pb.route(Q(901, "a", doc + [7])) == expect
        assert pb.last_decision == ("rebalance" if expect else "exploit")


def test_config_validation() -> None:
    from sglang_fair.core.errors import ConfigError
    from sglang_fair.routing import RouterConfig

    with pytest.raises(ConfigError, match="preble_window"):
        RouterConfig(policy="preble", preble_window=0)
    with pytest.raises(ConfigError, match="preble_balance"):
        RouterConfig(policy="preble", preble_balance=0.5)


def test_global_tree_match_lengths_per_worker() -> None:
    from sglang_fair.core.global_tree import GlobalRadixTree

    tree = GlobalRadixTree()
    a, b, c = [1] * 10, [2] * 5, [3] * 7
    tree.insert(a, 0)
    tree.insert(a + b, 1)
    tree.insert(a + [4], 2)
    assert tree.match_lengths(a + b + c) == {0: 10, 1: 15, 2: 10}
    assert tree.match_lengths(a[:3]) == {0: 3, 1: 3, 2: 3}
    assert tree.match_lengths(c) == {}
    tree.remove(a + b, 1, 12)
    assert tree.match_lengths(a + b) == {0: 10, 1: 12, 2: 10}
