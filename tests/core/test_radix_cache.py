"""The local prefix-cache model against a brute-force reference: a set of cached prefixes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from radix_support import longest, tree_prefixes

from sglang_fair.core.radix_cache import CacheNode, LocalRadixCache

tokens = st.lists(st.integers(0, 3), min_size=1, max_size=8)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), tokens),
        st.tuples(st.just("lock"), tokens),
        st.tuples(st.just("unlock"), st.integers(0, 5)),
        st.tuples(st.just("evict"), st.integers(1, 10)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_cache_matches_reference(operations: list[tuple[str, object]]) -> None:
    cache = LocalRadixCache(capacity=1000)
    ref: set[tuple[int, ...]] = set()
    locks: list[tuple[CacheNode, tuple[int, ...]]] = []
    for op, arg in operations:
        if op == "insert":
            assert isinstance(arg, list)
            before = len(ref)
            ref.update(tuple(arg[:i]) for i in range(1, len(arg) + 1))
            added, _ = cache.insert(arg)
            assert added == len(ref) - before
        elif op == "lock":
            assert isinstance(arg, list)
            length, node = cache.match_prefix(arg)
            assert length == longest(ref, arg)
            assert node.depth == length
            cache.lock(node)
            locks.append((node, tuple(arg[:length])))
        elif op == "unlock" and locks:
            assert isinstance(arg, int)
            node, _ = locks.pop(arg % len(locks))
            cache.unlock(node)
        elif op == "evict":
            assert isinstance(arg, int)
            locked = {p[:i] for _, p in locks for i in range(1, len(p) + 1)}
            evictable_before = len(ref) - len(locked)
            freed = 0
            for ev in cache.evict(arg):
                gone = {ev.tokens[:i] for i in range(ev.start + 1, len(ev.tokens) + 1)}
                assert gone <= ref and not gone & locked, "evicted a locked or uncached prefix"
                ref -= gone
                freed += len(gone)
            assert freed >= min(arg, evictable_before)
        locked = {p[:i] for _, p in locks for i in range(1, len(p) + 1)}
        assert tree_prefixes(cache) == ref
        assert cache.cached_tokens == len(ref)
        assert cache.evictable_tokens == len(ref) - len(locked)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_eviction_order_is_a_full_scans_lru_order(operations: list[tuple[str, object]]) -> None:
    """The lazily kept LRU heap evicts exactly the leaf a scan of the whole tree would pick: the
    unlocked leaf with the oldest access (ties by node identity, as before it was made lazy)."""
    cache = LocalRadixCache(capacity=1000)
    locks: list[CacheNode] = []
    for op, arg in operations:
        if op == "insert":
            cache.insert(arg)  # type: ignore[arg-type]
        elif op == "lock":
            node = cache.match_prefix(arg)[1]  # type: ignore[arg-type]
            cache.lock(node)
            locks.append(node)
        elif op == "unlock" and locks:
            cache.unlock(locks.pop(arg % len(locks)))  # type: ignore[operator]
        elif op == "evict":
            for _ in range(arg):  # type: ignore[call-overload]
                leaves = cache._evictable_leaves()
                oldest = min(leaves, key=lambda n: (n.last_access, id(n)), default=None)
                expected = [] if oldest is None else [cache._path(oldest)]
                assert [e.tokens for e in cache.evict(1)] == expected


def test_eviction_takes_least_recently_used_leaf_first() -> None:
    cache = LocalRadixCache(capacity=100)
    cache.insert([1, 1, 1])
    cache.insert([2, 2, 2])
    cache.insert([3, 3, 3])
    cache.match_prefix([1, 1, 1])  # [1,1,1] is now the most recently used
    evicted = cache.evict(3)
    assert [ev.tokens for ev in evicted] == [(2, 2, 2)]
    assert [ev.tokens for ev in cache.evict(3)] == [(3, 3, 3)]


def test_eviction_frees_a_parent_once_its_children_are_gone() -> None:
    cache = LocalRadixCache(capacity=100)
    cache.insert([7, 7, 1])
    cache.insert([7, 7, 2])
    evicted = cache.evict(4)
    assert sorted((ev.tokens, ev.start) for ev in evicted) == [((7, 7), 0), ((7, 7, 1), 2), ((7, 7, 2), 2)]
    assert cache.cached_tokens == 0


def test_locked_path_survives_and_alloc_fails_when_pool_is_full() -> None:
    cache = LocalRadixCache(capacity=10)
    _, node = cache.insert([5] * 6)
    cache.lock(node)
    assert cache.evictable_tokens == 0
    assert not cache.alloc(5)  # 4 free, nothing evictable
    assert cache.alloc(4)
    assert cache.free_tokens == 0
    cache.unlock(node)
    assert cache.alloc(3)  # evicts the unlocked path
    assert cache.cached_tokens == 0 and cache.reserved_tokens == 7
    cache.release(7)
    assert cache.free_tokens == 10
