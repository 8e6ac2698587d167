"""The simulator's speed internals keep what they replace: packed eviction paths, the collector, inserts
below a locked node, output-only bookings, the global tree's kept edge lengths, in-place compares and
inserts that start where their match ended."""

from __future__ import annotations

import gc
import random

import pytest

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError
from sglang_fair.core.global_tree import WIDTH, GlobalRadixTree, common_tokens, pack_tokens, unpack_tokens
from sglang_fair.core.radix_cache import LocalRadixCache
from sglang_fair.metrics.ledger import ServiceLedger
from sglang_fair.sim.batch import steps_per_window
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.simulator import long_run_collector


def test_evicted_paths_are_the_packed_tokens_after_splits() -> None:
    cache = LocalRadixCache(capacity=100)
    cache.insert([5, 6, 7, 8])
    cache.insert([5, 6, 9])  # splits [5, 6, 7, 8] after two tokens
    cache.insert([5, 1])
    evicted = cache.evict(100)
    assert sorted((e.tokens, e.start) for e in evicted) == [
        ((5,), 0), ((5, 1), 1), ((5, 6), 1), ((5, 6, 7, 8), 2), ((5, 6, 9), 2)]
    assert all(e.packed == pack_tokens(list(e.tokens)) for e in evicted)
    assert unpack_tokens(pack_tokens([0, 1, 2**32 - 1])) == (0, 1, 2**32 - 1)


def frozen(obj: object) -> bool:
    """Is ``obj`` out of the collector's passes (in the permanent generation, ``gc.freeze``)?
    ``gc.get_objects()`` lists the objects of the three collected generations only."""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


def test_long_run_collector_restores_the_collector() -> None:
    """What exists before a run is frozen during it and unfrozen after, unless the caller had frozen it;
    the young threshold is raised during the run and restored. (Counting frozen objects is no test:
    a frozen object freed by its reference count leaves the count, 860091 >= 860092 failed so.)"""
    before, was_frozen = gc.get_threshold(), gc.get_freeze_count() > 0
    try:
        gc.unfreeze()  # the suite may have frozen objects before (SGLang does): start from none
        workload = [[1, 2], [3]]  # containers made before the run
        assert not frozen(workload)
        with long_run_collector(young=123_456):
            assert gc.get_threshold()[0] == max(before[0], 123_456)
            assert frozen(workload) and frozen(workload[0])
            during = [4]
            assert not frozen(during)  # what the run makes is collected as usual
        assert gc.get_threshold() == before
        assert not frozen(workload) and not frozen(during)
        gc.freeze()  # a caller that froze objects itself keeps them frozen
        with long_run_collector(young=123_456):
            pass
        assert frozen(workload) and gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
        if was_frozen:
            gc.freeze()


def _tree_state(cache: LocalRadixCache) -> list[tuple[tuple[int, ...], int, int, int]]:
    """Every node as (path, depth, last access, ref), in a fixed order."""
    out, stack = [], [(cache.root, ())]
    while stack:
        node, path = stack.pop()
        path = (*path, *node.tokens)
        out.append((path, node.depth, node.last_access, node.ref))
        stack.extend((child, path) for child in node.children.values())
    return sorted(out)


def test_insert_below_a_locked_node_equals_an_insert_from_the_root() -> None:
    prompt, output = [1, 2, 3, 4, 5, 6], [7, 8, 9]
    caches = [LocalRadixCache(capacity=100), LocalRadixCache(capacity=100)]
    for cache in caches:
        cache.insert([1, 2, 3, 9])
        cache.insert([1, 2, 8])
    admitted = []
    for cache in caches:
        cached, node = cache.match_prefix(prompt)  # admission: [1, 2, 3] cached, split after it
        assert cached == 3
        cache.lock(node)
        admitted.append(node)
    base, below = caches
    added, at_base = base.insert(prompt)
    assert below.insert_below(admitted[1], prompt, 3)[0] == added == 3
    at_below = below.match_prefix(prompt)[1]
    base.match_prefix(prompt)  # the same clock ticks in both
    assert at_base.depth == at_below.depth == 6
    for cache, node in ((base, at_base), (below, at_below)):
        cache.lock(node)
    assert base.insert(prompt + output)[0] == below.insert_below(at_below, output)[0] == 3
    assert _tree_state(base) == _tree_state(below)  # the same nodes, depths, recency and locks
    assert _tree_state(base) != _tree_state(caches[0].__class__(capacity=100))  # negative control
    base.unlock(at_base)
    below.unlock(at_below)
    assert [e.tokens for e in base.evict(100)] == [e.tokens for e in below.evict(100)]


def test_insert_below_needs_a_locked_node() -> None:
    cache = LocalRadixCache(capacity=100)
    _, node = cache.insert([1, 2, 3])
    with pytest.raises(ConfigError):
        cache.insert_below(node, [4])


def test_book_output_books_what_book_books() -> None:
    a, b = ServiceLedger(CostModel(w_q=3.0), window=1.0), ServiceLedger(CostModel(w_q=3.0), window=1.0)
    for t, client, worker, n in ((0.5, "c0", 0, 4), (1.5, "c1", 1, 0), (1.7, "c0", 1, 2)):
        a.book(t, client, worker, output_tokens=n)
        b.book_output(t, client, worker, n)
    for kind in ("perceived", "actual"):
        for ledger in (a, b):
            assert [ledger.series(c, kind, 2.0) for c in ("c0", "c1")] == [[12.0, 6.0, 0.0], [0.0, 0.0, 0.0]]
            assert [ledger.total(c, kind) for c in ("c0", "c1")] == [18.0, 0.0]
    assert a.tokens == b.tokens and a.worker_actual == b.worker_actual


def test_global_tree_edges_keep_their_lengths_through_splits_and_removals() -> None:
    rng = random.Random(5)
    tree = GlobalRadixTree()
    for i in range(300):
        prompt = [rng.randrange(3) for _ in range(rng.randrange(1, 12))]
        tree.insert(prompt, i % 3)
        if i % 7 == 0:
            tree.remove(prompt, i % 3, rng.randrange(len(prompt) + 1))
    stack, nodes = [tree.root], 0
    while stack:
        node = stack.pop()
        assert node.length * WIDTH == len(node.key)
        nodes += 1
        stack.extend(node.children.values())
    assert nodes == tree.nodes + 1 > 50


def _global_state(tree: GlobalRadixTree) -> list[tuple[bytes, int, int]]:
    """Every node as (path, workers, last access), in a fixed order."""
    out, stack = [], [(tree.root, b"")]
    while stack:
        node, path = stack.pop()
        path += node.key
        out.append((path, node.workers, node.last_access))
        stack.extend((child, path) for child in node.children.values())
    return sorted(out)


def test_an_insert_right_after_its_match_equals_one_from_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """D²LPM (or Preble) matches, then inserts the same packed prompt: the insert starts at the matched
    node. Same trees, recency, per-worker counts and return values as inserts walking from the root,
    through splits, removals, forgotten workers and matches of other prompts in between."""
    claims = []
    claim = GlobalRadixTree._claim_path
    monkeypatch.setattr(GlobalRadixTree, "_claim_path", lambda *a: claims.append(1) or claim(*a))
    rng = random.Random(8)
    fast, slow = GlobalRadixTree(), GlobalRadixTree()
    for i in range(2000):
        ids = [rng.randrange(3) for _ in range(rng.randrange(1, 10))]
        packed, worker, op = pack_tokens(ids), rng.randrange(4), rng.random()
        if op < 0.1:
            start = rng.randrange(len(ids) + 1)
            fast.remove(packed, worker, start)
            slow.remove(ids, worker, start)
        elif op < 0.12:
            fast.forget_worker(worker)
            slow.forget_worker(worker)
        elif op < 0.2:  # a match not followed by its insert: the next insert must not start there
            assert fast.match_mask(packed) == slow.match_mask(ids)
        else:  # D²LPM matches by mask, Preble by per-worker lengths: both leave the cursor
            if op < 0.6:
                assert fast.match_mask(packed) == slow.match_mask(ids)  # the list is packed anew: no cursor
            else:
                assert fast.match_lengths(packed) == slow.match_lengths(ids)
            if op < 0.3:  # a change between the match and the insert: the insert must walk from the root
                cut = rng.randrange(len(ids) + 1)
                for tree, key in ((fast, packed), (slow, ids)):
                    if op < 0.25:
                        tree.remove(key, worker, cut)
                    else:
                        tree.forget_worker(worker)
            assert fast.insert(packed, worker) == slow.insert(ids, worker), i
        assert _global_state(fast) == _global_state(slow), i
        assert (fast.worker_tokens, fast.tokens, fast.nodes) == (slow.worker_tokens, slow.tokens, slow.nodes)
    assert len(claims) > 1000  # the precondition: most inserts started at a matched node


def test_common_prefix_of_packed_edges() -> None:
    rng = random.Random(6)
    for _ in range(500):
        key = [rng.randrange(3) for _ in range(rng.randrange(1, 8))]
        toks = [rng.randrange(3) for _ in range(rng.randrange(0, 12))]
        off = rng.randrange(len(toks) + 1)
        expect = 0
        while expect < min(len(key), len(toks) - off) and key[expect] == toks[off + expect]:
            expect += 1
        assert common_tokens(pack_tokens(key), pack_tokens(toks), off * WIDTH) == expect


def test_output_past_prompt_is_the_full_sequence_past_the_tokens() -> None:
    req = EngineRequest(rid=0, client="c", tokens=[1, 2, 3], output_len=4, arrival=0.0,
                        output_ids=(10, 11, 12, 13))
    req.generated = 2
    assert unpack_tokens(req.output_past_prompt()) == tuple(req.full_sequence()[3:]) == (10, 11)
    req.tokens = req.full_sequence()  # a retraction: the output so far becomes input
    req.generated = 4
    assert unpack_tokens(req.output_past_prompt()) == tuple(req.full_sequence()[len(req.tokens):]) == (12, 13)


def test_steps_per_window_counts_each_step_in_the_window_it_ends_in() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ends = sorted(rng.uniform(0.0, 3.0) for _ in range(rng.randrange(1, 20)))
        started, window = rng.uniform(0.0, 5.0), rng.choice((0.5, 1.0, 2.0))
        expect: dict[int, int] = {}
        for end in ends:
            k = int((started + end) / window)
            expect[k] = expect.get(k, 0) + 1
        got = steps_per_window(ends, started, window)
        assert got == expect and list(got) == sorted(got)
