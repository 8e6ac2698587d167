"""A model of a worker's prefix cache: a KV pool of ``capacity`` tokens shared with a radix tree.

Tokens in the pool are either in the tree (``cached_tokens``) or reserved outside it by running
requests (``reserved_tokens``). Running requests lock the tree path they reuse (reference counts);
eviction removes least-recently-used unlocked leaves, one whole node at a time, as SGLang's radix
cache does. Recency is a logical clock that advances on every match and insert: no wall clock.

A :class:`CacheListener` set as ``listener`` hears of every change that can move a prefix match:
an insert (its tokens, how many were already cached, the node that ends there) and each evicted
node. Splits move no match (the lower part keeps its identity), so they are not reported.

Keys are kept packed, 4 bytes per token id (:func:`~sglang_fair.core.global_tree.pack_tokens`), as
the router's tree keeps them: an edge compares in place (memcmp), an evicted path is the join of its
nodes' keys, and the tree holds no Python ints for the collector to walk. Every method takes a
sequence of ids or packed bytes and counts in tokens; a host that matches the same prompt many times
(the simulator) passes packed bytes, which skips the conversion.
"""

from __future__ import annotations

import heapq
import itertools
from typing import NamedTuple, Protocol

from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.global_tree import WIDTH, TokenKey, common_tokens, pack_tokens, unpack_tokens


class CacheNode:
    """One edge of the tree: ``key`` holds its tokens packed; ``ref`` counts running requests using it."""

    __slots__ = ("children", "depth", "key", "last_access", "length", "parent", "ref")

    def __init__(self, key: bytes, parent: CacheNode | None, depth: int) -> None:
        self.key = key
        self.length = len(key) // WIDTH  # tokens of this edge
        self.parent = parent
        self.depth = depth  # tokens from the root to the end of this node
        self.children: dict[bytes, CacheNode] = {}  # by the first packed token of the child
        self.ref = 0
        self.last_access = 0

    @property
    def tokens(self) -> tuple[int, ...]:
        """This edge's token ids (for inspection; the tree compares ``key``)."""
        return unpack_tokens(self.key)


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

    def on_insert(self, tokens: bytes, cached: int, node: CacheNode) -> None:
        """Tokens ``cached`` onwards of ``tokens`` (packed) were added below ``node``, where the
        first ``cached`` end (``tokens`` may start below the root: :meth:`LocalRadixCache.insert_below`)."""

    def on_evict(self, node: CacheNode) -> None:
        """``node`` (a leaf) left the tree."""


class LocalRadixCache:
    """Prefix cache + KV pool accounting of one worker (see the module docstring)."""

    def __init__(self, capacity: int) -> None:
        require(capacity > 0, f"cache capacity must be > 0, got {capacity}")
        self.capacity = capacity
        self.root = CacheNode(b"", None, 0)
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
    def match_prefix(self, tokens: TokenKey) -> tuple[int, CacheNode]:
        """Longest cached prefix of ``tokens``: its length and the node that ends exactly there."""
        return self._match_from(self.root, pack_tokens(tokens), 0, next(self._clock))

    def _match_from(self, node: CacheNode, toks: bytes, pos: int, now: int) -> tuple[int, CacheNode]:
        """:meth:`match_prefix` of packed ``toks`` from ``node``, which ends at token ``pos``."""
        off, n = pos * WIDTH, len(toks)
        while off < n:
            child = node.children.get(toks[off : off + WIDTH])
            if child is None:
                break
            child.last_access = now
            if toks.startswith(child.key, off):  # the whole edge, compared in place
                node, off = child, off + len(child.key)
                continue
            common = common_tokens(child.key, toks, off)
            if common > 0:  # a match ends mid-edge: split there, so it ends on a node
                node = self._split(child, common)
                off += common * WIDTH
            break
        return off // WIDTH, node

    def insert(self, tokens: TokenKey) -> tuple[int, CacheNode]:
        """Add ``tokens`` to the tree; return how many tokens were new and the node ending at the end.

        The caller owns the pool space for the new tokens (a running request's reservation) and
        releases its reservation afterwards, so the pool never overflows here.
        """
        toks = pack_tokens(tokens)
        return self._add(toks, *self._match_from(self.root, toks, 0, next(self._clock)))

    def insert_below(self, node: CacheNode, tokens: TokenKey, start: int = 0) -> tuple[int, CacheNode]:
        """:meth:`insert` of the path root..``node`` followed by ``tokens[start:]``, without comparing
        the path again: ``node`` must be locked (so it is still in the tree and ends where it did). The
        path is touched as a match from the root would touch it, so recency is the same."""
        require(node.ref > 0, "insert_below needs a locked node")
        now = next(self._clock)
        cur = node
        while cur is not self.root:
            cur.last_access = now
            cur = cur.parent  # type: ignore[assignment]
        toks = pack_tokens(tokens)
        return self._add(toks, *self._match_from(node, toks, start, now))

    def _add(self, toks: bytes, matched: int, node: CacheNode) -> tuple[int, CacheNode]:
        """Hang the tokens of packed ``toks`` from ``matched`` on below ``node`` (which ends where
        the first ``matched`` do)."""
        off = matched * WIDTH
        if off == len(toks):
            return 0, node
        if self.listener is not None:
            self.listener.on_insert(toks, matched, node)
        leaf = CacheNode(toks[off:], node, node.depth + (len(toks) - off) // WIDTH)
        leaf.last_access = next(self._clock)
        node.children[toks[off : off + WIDTH]] = leaf
        self._push_lru(leaf)
        self.cached_tokens += leaf.length
        self.evictable_tokens += leaf.length
        return leaf.length, leaf

    def _split(self, child: CacheNode, at: int) -> CacheNode:
        """Split ``child`` after ``at`` tokens; return the new upper node."""
        parent = child.parent
        assert parent is not None
        upper = CacheNode(child.key[: at * WIDTH], parent, child.depth - child.length + at)
        upper.ref, upper.last_access = child.ref, child.last_access
        child.key = child.key[at * WIDTH :]
        child.length -= at
        child.parent = upper
        upper.children[child.key[:WIDTH]] = child
        parent.children[upper.key[:WIDTH]] = upper
        return upper

    # ---- reference counts -------------------------------------------------------------------------
    def lock(self, node: CacheNode) -> None:
        """A running request uses the path root..node: it must not be evicted."""
        while node is not self.root:
            if node.ref == 0:
                self.evictable_tokens -= node.length
            node.ref += 1
            node = node.parent  # type: ignore[assignment]

    def unlock(self, node: CacheNode) -> None:
        while node is not self.root:
            require(node.ref > 0, "unlock of a node that is not locked")
            node.ref -= 1
            if node.ref == 0:
                self.evictable_tokens += node.length
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
            evicted.append(Evicted(self._packed_path(leaf), leaf.depth - leaf.length))
            self.evicted.append(evicted[-1])
            if self.listener is not None:
                self.listener.on_evict(leaf)
            del parent.children[leaf.key[:WIDTH]]
            leaf.parent = None
            freed += leaf.length
            self.cached_tokens -= leaf.length
            self.evictable_tokens -= leaf.length
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
    def _packed_path(node: CacheNode) -> bytes:
        """root..node, packed."""
        parts: list[bytes] = []
        cur: CacheNode | None = node
        while cur is not None and cur.parent is not None:
            parts.append(cur.key)
            cur = cur.parent
        parts.reverse()
        return b"".join(parts)

    @classmethod
    def _path(cls, node: CacheNode) -> tuple[int, ...]:
        return unpack_tokens(cls._packed_path(node))
