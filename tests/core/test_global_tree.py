"""The router's global tree against a brute-force reference: prefix -> set of workers."""

from __future__ import annotations

from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.core.global_tree import GlobalNode, GlobalRadixTree, pack_tokens, worker_set

Ref = dict[tuple[int, ...], set[int]]


def ref_longest(ref: Ref, seq: list[int]) -> tuple[int, frozenset[int]]:
    n = 0
    while n < len(seq) and ref.get(tuple(seq[: n + 1])):
        n += 1
    return n, frozenset(ref[tuple(seq[:n])]) if n else frozenset()


def tree_map(tree: GlobalRadixTree) -> Ref:
    out: Ref = {}
    stack: list[tuple[GlobalNode, tuple[int, ...]]] = [(tree.root, ())]
    while stack:
        node, path = stack.pop()
        for child in node.children.values():
            assert child.workers, "a node no worker holds must be unlinked"
            assert child.workers & node.workers == child.workers or node is tree.root
            full = path + tuple(array("I", child.key))
            for i in range(len(path) + 1, len(full) + 1):
                out[full[:i]] = set(worker_set(child.workers))
            stack.append((child, full))
    return out


seqs = st.lists(st.integers(0, 2), min_size=1, max_size=7)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), seqs, st.integers(0, 3), st.just(0)),
        st.tuples(st.just("remove"), seqs, st.integers(0, 3), st.integers(0, 7)),
        st.tuples(st.just("match"), seqs, st.just(0), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_global_tree_matches_reference(operations: list[tuple[str, list[int], int, int]]) -> None:
    tree = GlobalRadixTree()
    ref: Ref = {}
    for op, seq, worker, start in operations:
        if op == "insert":
            held = next((i for i in range(len(seq)) if worker not in ref.get(tuple(seq[: i + 1]), ())),
                        len(seq))
            for i in range(1, len(seq) + 1):
                ref.setdefault(tuple(seq[:i]), set()).add(worker)
            assert tree.insert(seq, worker) == held
        elif op == "remove":
            start = min(start, len(seq))
            gone = tuple(seq[: start + 1])  # the first position the worker no longer holds
            for key in list(ref):
                if len(key) > start and key[: start + 1] == gone:
                    ref[key].discard(worker)
            ref = {k: v for k, v in ref.items() if v}
            tree.remove(seq, worker, start)
        else:
            assert tree.longest_match(seq) == ref_longest(ref, seq)
        assert tree_map(tree) == ref
        assert tree.tokens == len(ref)
        for w in range(4):
            assert tree.worker_tokens[w] == sum(1 for v in ref.values() if w in v)


def test_longest_match_returns_the_workers_holding_the_longest_prefix() -> None:
    tree = GlobalRadixTree()
    tree.insert([1, 2, 3, 4], worker=0)
    tree.insert([1, 2, 3, 9], worker=1)
    tree.insert([1, 2], worker=2)
    assert tree.longest_match([1, 2, 3, 4, 5]) == (4, frozenset({0}))
    assert tree.longest_match([1, 2, 3, 7]) == (3, frozenset({0, 1}))
    assert tree.longest_match([1, 5]) == (1, frozenset({0, 1, 2}))
    assert tree.longest_match([8]) == (0, frozenset())
    tree.remove([1, 2, 3, 4], worker=0, start=2)  # worker 0 evicted everything past [1, 2]
    assert tree.longest_match([1, 2, 3, 4]) == (3, frozenset({1}))
    assert tree.longest_match([1, 2]) == (2, frozenset({0, 1, 2}))


def test_packed_and_list_tokens_are_interchangeable() -> None:
    tree = GlobalRadixTree()
    tree.insert(pack_tokens([5, 6, 7, 70_000]), worker=1)
    assert tree.longest_match([5, 6, 7, 70_000, 1]) == (4, frozenset({1}))
    assert tree.longest_match(pack_tokens([5, 6, 9])) == (2, frozenset({1}))
    tree.remove([5, 6, 7, 70_000], worker=1, start=1)
    assert tree.longest_match([5, 6]) == (1, frozenset({1}))


def test_tree_is_bounded_with_lru_pruning() -> None:
    tree = GlobalRadixTree(max_tokens=100)
    for i in range(50):
        tree.insert([i] * 10, worker=i % 3)
    assert tree.tokens <= 100
    assert tree.longest_match([49] * 10) == (10, frozenset({49 % 3}))  # recent: kept
    assert tree.longest_match([0] * 10) == (0, frozenset())  # oldest: pruned
    assert sum(tree.worker_tokens.values()) == tree.tokens
