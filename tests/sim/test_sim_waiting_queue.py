"""The simulator's incremental waiting queue (sim/waiting.py) against a full re-match after every change.

Random inserts, matches (which split nodes), locks, evictions, arrivals (some sharing a prompt
object, some with equal arrival times) and admissions drive a LocalRadixCache; after each change
every waiting request's ``cached_len`` must equal its longest cached prefix (computed from the
tree's content, without touching LRU recency) and the view must be exactly ``lpm_order`` of the
queue. Negative control: the same queue with the cache's notifications cut off is caught.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from radix_support import longest, tree_prefixes

from sglang_fair.admission.lpm import LpmOrdered, lpm_order
from sglang_fair.core.radix_cache import CacheNode, LocalRadixCache
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.waiting import WaitingQueue

tokens = st.lists(st.integers(0, 2), min_size=1, max_size=7)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), tokens),
        st.tuples(st.just("arrive_same"), st.integers(0, 9)),  # same prompt object as an earlier request
        st.tuples(st.just("insert"), tokens),
        st.tuples(st.just("match"), tokens),
        st.tuples(st.just("lock"), tokens),
        st.tuples(st.just("unlock"), st.integers(0, 5)),
        st.tuples(st.just("evict"), st.integers(1, 6)),
        st.tuples(st.just("admit"), st.integers(0, 9)),
    ),
    max_size=60,
)


def errors(operations: list[tuple[str, object]], notify: bool = True) -> int:
    """Replay ``operations``; count the checks where the queue disagrees with a full re-match."""
    cache = LocalRadixCache(capacity=10_000)
    queue = WaitingQueue(cache, by_cache=True)
    if not notify:
        cache.listener = None
    locks: list[CacheNode] = []
    reqs: list[EngineRequest] = []
    wrong = 0
    for op, arg in operations:
        if op in ("arrive", "arrive_same"):
            if op == "arrive_same" and not reqs:
                continue
            src = reqs[int(arg) % len(reqs)] if op == "arrive_same" else None  # type: ignore[call-overload]
            toks = src.tokens if src is not None else list(arg)  # type: ignore[call-overload]
            req = EngineRequest(rid=len(reqs), client="c", tokens=toks, output_len=1,
                                arrival=float(len(reqs) // 2), key=src.key if src is not None else object())
            reqs.append(req)
            queue.append(req)
        elif op == "insert":
            cache.insert(list(arg))  # type: ignore[call-overload]
        elif op == "match":
            cache.match_prefix(list(arg))  # type: ignore[call-overload]
        elif op == "lock":
            node = cache.match_prefix(list(arg))[1]  # type: ignore[call-overload]
            cache.lock(node)
            locks.append(node)
        elif op == "unlock" and locks:
            cache.unlock(locks.pop(int(arg) % len(locks)))  # type: ignore[call-overload]
        elif op == "evict":
            cache.evict(int(arg))  # type: ignore[call-overload]
        elif op == "admit" and queue:
            view = queue.view()
            queue.remove([view[int(arg) % len(view)]])  # type: ignore[call-overload]
        wrong += check(queue, cache)
    return wrong


def check(queue: WaitingQueue, cache: LocalRadixCache) -> int:
    view = queue.view()
    assert isinstance(view, LpmOrdered) and sorted(r.rid for r in view) == sorted(r.rid for r in queue)
    prefixes = tree_prefixes(cache)
    wrong = sum(r.cached_len != longest(prefixes, r.tokens) for r in view)
    fresh = list(queue)
    truth = {r.rid: longest(prefixes, r.tokens) for r in fresh}
    saved = {r.rid: r.cached_len for r in fresh}
    for r in fresh:
        r.cached_len = truth[r.rid]
    order = [r.rid for r in lpm_order(fresh)]
    for r in fresh:
        r.cached_len = saved[r.rid]
    return wrong + (order != [r.rid for r in view])


@settings(max_examples=400, deadline=None)
@given(ops)
def test_incremental_matches_equal_a_full_rematch(operations: list[tuple[str, object]]) -> None:
    assert errors(operations) == 0


def test_without_notifications_stale_matches_are_caught() -> None:
    grown = [("arrive", [1, 2, 3]), ("insert", [1, 2])]
    shrunk = [("insert", [1, 2]), ("arrive", [1, 2, 3]), ("arrive", [0]), ("evict", 5)]
    assert errors(grown) == 0 and errors(shrunk) == 0
    assert errors(grown, notify=False) > 0
    assert errors(shrunk, notify=False) > 0
    rng = random.Random(7)  # and on random sequences like the property's, most disagree somewhere
    caught = 0
    for _ in range(50):
        seq: list[tuple[str, object]] = []
        for _ in range(30):
            kind = rng.choice(["arrive", "insert", "evict", "admit", "match"])
            arg: object = ([rng.randint(0, 2) for _ in range(rng.randint(1, 6))]
                           if kind in ("arrive", "insert", "match") else rng.randint(1, 6))
            seq.append((kind, arg))
        assert errors(seq) == 0
        caught += errors(seq, notify=False) > 0
    assert caught >= 25


def test_matches_only_what_can_have_changed() -> None:
    cache = LocalRadixCache(capacity=10_000)
    queue = WaitingQueue(cache, by_cache=True)
    for i in range(100):
        queue.append(EngineRequest(rid=i, client="c", tokens=[i, 1, 2], output_len=1, arrival=float(i)))
    queue.view()
    assert queue.matches == 100
    cache.insert([5, 1, 9])  # only request 5 can gain
    cache.insert([7, 7])
    assert [r.rid for r in queue.view()][:2] == [5, 7] and queue.matches == 102
    cache.evict(100)
    assert [r.rid for r in queue.view()][:2] == [0, 1] and queue.matches == 104


def test_policies_that_ignore_the_cache_are_not_matched() -> None:
    cache = LocalRadixCache(capacity=100)
    cache.insert([1, 2])
    queue = WaitingQueue(cache, by_cache=False)
    req = EngineRequest(rid=0, client="c", tokens=[1, 2, 3], output_len=1, arrival=0.0)
    queue.append(req)
    assert queue.view() == [req] and req.cached_len == 0 and queue.matches == 0 and cache.listener is None
