"""A brute-force reference for radix caches: the set of prefixes a cache holds."""

from __future__ import annotations

from sglang_fair.core.radix_cache import CacheNode, LocalRadixCache


def tree_prefixes(cache: LocalRadixCache) -> set[tuple[int, ...]]:
    out: set[tuple[int, ...]] = set()
    stack: list[tuple[CacheNode, tuple[int, ...]]] = [(cache.root, ())]
    while stack:
        node, path = stack.pop()
        for child in node.children.values():
            assert child.key and child.key[:4] in node.children and child.length == len(child.tokens)
            full = path + child.tokens
            assert child.depth == len(full)
            out.update(full[:i] for i in range(len(path) + 1, len(full) + 1))
            stack.append((child, full))
    return out


def longest(prefixes: set[tuple[int, ...]], seq: list[int]) -> int:
    n = 0
    while n < len(seq) and tuple(seq[: n + 1]) in prefixes:
        n += 1
    return n
