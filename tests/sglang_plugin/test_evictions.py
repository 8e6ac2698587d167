"""SGLang's KV-cache events (pages by hash) turned into the router's token-keyed evictions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.core.global_tree import GlobalRadixTree, pack_tokens
from sglang_fair.sglang_plugin.evictions import BlockIndex


def chain(index: BlockIndex, first: int, parent: int | None, tokens: list[int], page: int = 2) -> list[int]:
    """Store ``tokens`` as consecutive pages with hashes first, first+1, ...; return the hashes."""
    hashes = list(range(first, first + (len(tokens) + page - 1) // page))
    index.stored(hashes, parent, tokens, page)
    return hashes


def test_removing_a_leaf_page_reports_its_whole_path_and_where_the_eviction_starts() -> None:
    index = BlockIndex()
    root = chain(index, 1, None, [10, 11, 12, 13])  # pages 1: [10, 11], 2: [12, 13]
    chain(index, 10, root[-1], [20, 21, 22])  # pages 10: [20, 21], 11: [22]
    assert index.removed([11]) == [(pack_tokens([10, 11, 12, 13, 20, 21, 22]), 6)]
    assert len(index) == 3


def test_a_removed_subtree_is_reported_once_at_its_top() -> None:
    index = BlockIndex()
    root = chain(index, 1, None, [1, 2, 3, 4])
    left = chain(index, 10, root[-1], [5, 6])
    chain(index, 20, left[-1], [7, 8])
    chain(index, 30, root[-1], [9, 9])  # a sibling that stays
    assert index.removed([21, 20, 10]) == [(pack_tokens([1, 2, 3, 4, 5, 6]), 4)]
    assert index.removed([99]) == []  # unknown pages are skipped
    assert sorted(index.pages) == [1, 2, 30]


def test_cleared_reports_every_root_page() -> None:
    index = BlockIndex()
    chain(index, 1, None, [1, 2, 3])
    chain(index, 10, None, [7, 7])
    assert sorted(index.cleared()) == sorted([(pack_tokens([1, 2]), 0), (pack_tokens([7, 7]), 0)])
    assert len(index) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=8),
       st.data())
def test_the_global_tree_matches_the_cache_after_removals(prompts: list[list[int]],
                                                          data: st.DataObject) -> None:
    """Store prompts page by page (page size 1, hashes = paths) in both a BlockIndex and a global
    tree, remove a random set of leaf-closed pages, and the tree's match equals the longest prefix
    still cached."""
    index, tree, cached = BlockIndex(), GlobalRadixTree(), set()
    for prompt in prompts:
        for end in range(1, len(prompt) + 1):
            path = tuple(prompt[:end])
            if path not in cached:
                index.stored([hash(path)], hash(path[:-1]) if end > 1 else None, [path[-1]], 1)
                cached.add(path)
        tree.insert(prompt, 0)
    doomed = data.draw(st.sets(st.sampled_from(sorted(cached))))
    doomed |= {p for p in cached if any(p[: len(d)] == d for d in doomed)}  # caches evict leaves first
    for tokens, start in index.removed([hash(p) for p in doomed]):
        tree.remove(tokens, 0, start)
    for prompt in prompts:
        expect = max(n for n in range(len(prompt) + 1) if n == 0 or tuple(prompt[:n]) in cached - doomed)
        assert tree.longest_match(prompt)[0] == expect
