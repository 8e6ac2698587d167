"""A model of a worker's prefix cache: a KV pool of ``capacity`` tokens shared with a radix tree.

Tokens in the pool are either in the tree (``cached_tokens``) or reserved outside it by running
requests (``reserved_tokens``). Running requests lock the tree path they reuse (reference counts);
eviction removes least-recently-used unlocked leaves, one whole node at a time, as SGLang's radix
cache does. Recency is a logical clock that advances on every match and insert: no wall clock.

A :class:`CacheListener` set as ``listener`` hears of every change that can move a prefix match:
an insert (its tokens, how many were already cached, the node that ends there) and each evicted
node. Splits move no match (the lower part keeps its identity), so they are not reported.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from itertools import chain
from typing import NamedTuple, Protocol

from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.global_tree import pack_tokens, unpack_tokens


class CacheNode:
    """One edge of the tree: ``key`` holds its tokens; ``ref`` counts running requests using it."""

    __slots__ = ("children", "depth", "key", "last_access", "packed", "parent", "ref")

    def __init__(self, key: list[int], parent: CacheNode | None, depth: int) -> None:
        self.key = key
        self.parent = parent
        self.depth = depth  # tokens from the root to the end of this node
        self.children: dict[int, CacheNode] = {}
        self.ref = 0
        self.last_access = 0
        self.packed: bytes | None = None  # ``key`` packed (global_tree.pack_tokens), made on first need


class Evicted(NamedTuple):
    """``tokens[start:]`` left the cache; ``tokens[:start]`` is still cached. The path is kept packed
    (:func:`~sglang_fair.core.global_tree.pack_tokens`), as the router's tree takes it. A named tuple:
    one is made per evicted node, and a frozen dataclass sets each field through ``object.__setattr__``."""

    packed: bytes
    start: int

    @property
    def tokens(self) -> tuple[int, ...]:
        return unpack_tokens(self.packed)


class CacheListener(Protocol):
    """Told of the changes of a :class:`LocalRadixCache` that can change a prefix match."""

    def on_insert(self, tokens: list[int], cached: int, node: CacheNode) -> None:
        """``tokens[cached:]`` was added below ``node``, where ``tokens[:cached]`` ends (``tokens``
        may start below the root: :meth:`LocalRadixCache.insert_below`)."""

    def on_evict(self, node: CacheNode) -> None:
        """``node`` (a leaf) left the tree."""


class LocalRadixCache:
    """Prefix cache + KV pool accounting of one worker (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        require(capacity > 0, f"cache capacity must be > 0, got {capacity}")
        self.capacity = capacity
        self.root = CacheNode([], None, 0)
        self.root.ref = 1  # the root is never evicted
        self.cached_tokens = 0
        self.evictable_tokens = 0
        self.reserved_tokens = 0
        self.evicted: list[Evicted] = []  # log of evictions, for a host to drain and report
        self._clock = itertools.count(1)
        self.listener: CacheListener | None = None
        # evictable leaves by recency, kept lazily: an entry's time is a lower bound of the node's
        # last access (a touch does not push; a stale entry is re-pushed when it reaches the top) and
        # entries of nodes that are no longer evictable leaves are dropped when they reach the top
        self._lru: list[tuple[int, int, CacheNode]] = []

    @property
    def free_tokens(self) -> int:
        return self.capacity - self.cached_tokens - self.reserved_tokens

    # ---- lookup and insertion ---------------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int]) -> tuple[int, CacheNode]:
        """Longest cached prefix of ``tokens``: its length and the node that ends exactly there."""
        tokens = as_token_list(tokens)
        return self._match_from(self.root, tokens, 0, next(self._clock))

    def _match_from(self, node: CacheNode, tokens: list[int], pos: int, now: int) -> tuple[int, CacheNode]:
        """:meth:`match_prefix` of ``tokens`` from ``node``, which ends at ``tokens[:pos]``."""
        n = len(tokens)
        while pos < n:
            child = node.children.get(tokens[pos])
            if child is None:
                break
            key = child.key
            end = pos + len(key)
            common = len(key) if key == tokens[pos:end] else common_len(key, tokens, pos)
            child.last_access = now
            if common < len(key):
                if common > 0:
                    node = self._split(child, common)
                    pos += common
                break
            node, pos = child, pos + len(key)
        return pos, node

    def insert(self, tokens: Sequence[int]) -> tuple[int, CacheNode]:
        """Add ``tokens`` to the tree; return how many tokens were new and the node ending at the end.

        The caller owns the pool space for the new tokens (a running request's reservation) and
        releases its reservation afterwards, so the pool never overflows here.
        """
        tokens = as_token_list(tokens)
        return self._add(tokens, *self.match_prefix(tokens))

    def insert_below(self, node: CacheNode, tokens: Sequence[int], start: int = 0) -> tuple[int, CacheNode]:
        """:meth:`insert` of the path root..``node`` followed by ``tokens[start:]``, without comparing
        the path again: ``node`` must be locked (so it is still in the tree and ends where it did). The
        path is touched as a match from the root would touch it, so recency is the same."""
        require(node.ref > 0, "insert_below needs a locked node")
        now = next(self._clock)
        cur = node
        while cur is not self.root:
            cur.last_access = now
            cur = cur.parent  # type: ignore[assignment]
        tokens = as_token_list(tokens)
        matched, end = self._match_from(node, tokens, start, now)
        return self._add(tokens, matched, end)

    def _add(self, tokens: list[int], matched: int, node: CacheNode) -> tuple[int, CacheNode]:
        """Hang ``tokens[matched:]`` below ``node`` (which ends where ``tokens[:matched]`` does)."""
        if matched == len(tokens):
            return 0, node
        if self.listener is not None:
            self.listener.on_insert(tokens, matched, node)
        leaf = CacheNode(tokens[matched:], node, node.depth + len(tokens) - matched)
        leaf.last_access = next(self._clock)
        node.children[leaf.key[0]] = leaf
        self._push_lru(leaf)
        added = len(leaf.key)
        self.cached_tokens += added
        self.evictable_tokens += added
        return added, leaf

    def _split(self, child: CacheNode, at: int) -> CacheNode:
        """Split ``child`` after ``at`` tokens; return the new upper node."""
        parent = child.parent
        assert parent is not None
        upper = CacheNode(child.key[:at], parent, child.depth - len(child.key) + at)
        upper.ref, upper.last_access = child.ref, child.last_access
        child.key = child.key[at:]
        child.packed = None
        child.parent = upper
        upper.children[child.key[0]] = child
        parent.children[upper.key[0]] = upper
        return upper

    # ---- reference counts -------------------------------------------------------------------------
    def lock(self, node: CacheNode) -> None:
        """A running request uses the path root..node: it must not be evicted."""
        while node is not self.root:
            if node.ref == 0:
                self.evictable_tokens -= len(node.key)
            node.ref += 1
            node = node.parent  # type: ignore[assignment]

    def unlock(self, node: CacheNode) -> None:
        while node is not self.root:
            require(node.ref > 0, "unlock of a node that is not locked")
            node.ref -= 1
            if node.ref == 0:
                self.evictable_tokens += len(node.key)
                if not node.children:
                    self._push_lru(node)
            node = node.parent  # type: ignore[assignment]

    # ---- pool -------------------------------------------------------------------------------------
    def alloc(self, n: int) -> bool:
        """Reserve ``n`` pool tokens outside the tree, evicting LRU leaves if needed."""
        if n < 0:  # not require(): its message would be formatted at every call (here and below)
            raise ConfigError(f"cannot reserve {n} tokens")
        if self.free_tokens < n:
            self.evict(n - self.free_tokens)
        if self.free_tokens < n:
            return False
        self.reserved_tokens += n
        return True

    def release(self, n: int) -> None:
        if not 0 <= n <= self.reserved_tokens:
            raise ConfigError(f"release of {n} tokens, {self.reserved_tokens} reserved")
        self.reserved_tokens -= n

    def evict(self, n: int) -> list[Evicted]:
        """Remove least-recently-used unlocked leaves until ``n`` tokens are freed or none is left."""
        evicted: list[Evicted] = []
        freed = 0
        while freed < n:
            leaf = self._pop_lru()
            if leaf is None:
                break
            parent = leaf.parent
            assert parent is not None
            evicted.append(Evicted(self._packed_path(leaf), leaf.depth - len(leaf.key)))
            self.evicted.append(evicted[-1])
            if self.listener is not None:
                self.listener.on_evict(leaf)
            del parent.children[leaf.key[0]]
            leaf.parent = None
            freed += len(leaf.key)
            self.cached_tokens -= len(leaf.key)
            self.evictable_tokens -= len(leaf.key)
            if parent is not self.root and not parent.children and parent.ref == 0:
                self._push_lru(parent)
        return evicted

    def _push_lru(self, node: CacheNode) -> None:
        heapq.heappush(self._lru, (node.last_access, id(node), node))
        if len(self._lru) > 2 * self.cached_tokens + 4096:  # mostly dead entries: rebuild from the tree
            self._lru = [(leaf.last_access, id(leaf), leaf) for leaf in self._evictable_leaves()]
            heapq.heapify(self._lru)

    def _pop_lru(self) -> CacheNode | None:
        """The least recently used evictable leaf, or None."""
        heap = self._lru
        while heap:
            when, key, node = heap[0]
            if node.parent is None or node.children or node.ref:  # evicted, grew children, or locked
                heapq.heappop(heap)
            elif when != node.last_access:  # touched since it was pushed: move it to its place
                heapq.heapreplace(heap, (node.last_access, key, node))
            else:
                heapq.heappop(heap)
                return node
        return None

    def _evictable_leaves(self) -> list[CacheNode]:
        leaves, stack = [], [self.root]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node.ref == 0:
                leaves.append(node)
        return leaves

    @staticmethod
    def _path(node: CacheNode) -> tuple[int, ...]:
        parts: list[list[int]] = []
        cur: CacheNode | None = node
        while cur is not None and cur.parent is not None:
            parts.append(cur.key)
            cur = cur.parent
        return tuple(chain.from_iterable(reversed(parts)))

    @staticmethod
    def _packed_path(node: CacheNode) -> bytes:
        """root..node packed; each node keeps its packed key, so shared ancestors are packed once."""
        parts: list[bytes] = []
        cur: CacheNode | None = node
        while cur is not None and cur.parent is not None:
            if cur.packed is None:
                cur.packed = pack_tokens(cur.key)
            parts.append(cur.packed)
            cur = cur.parent
        parts.reverse()
        return b"".join(parts)


def as_token_list(tokens: Sequence[int]) -> list[int]:
    """Token ids as a list, the one type the trees store and compare (slices compare in C)."""
    return tokens if isinstance(tokens, list) else list(tokens)


def common_len(key: list[int], tokens: list[int], pos: int) -> int:
    """Length of the common prefix of ``key`` and ``tokens[pos:]``."""
    n = min(len(key), len(tokens) - pos)
    if n == len(key) and key == tokens[pos : pos + n]:  # the common case: the whole edge matches
        return n
    if key[:n] == tokens[pos : pos + n]:
        return n
    lo, hi = 0, n  # binary search on equal-prefix length: slices compare in C
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if key[:mid] == tokens[pos : pos + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
