"""The router's global radix tree: which workers hold which prefixes ([1] §5, Alg. 2).

Each node records, as a bit mask, the workers that hold the whole path from the root to the node's
end; a worker that holds a prefix holds every shorter one, so a child's mask is a subset of its
parent's. The tree is bounded: past ``max_tokens`` it prunes least-recently-used leaves (a logical
clock, no wall clock) down to 90% of the bound, which only makes the router forget, never route
wrongly.

Token ids are stored packed, 4 bytes each (:func:`pack_tokens`): edges compare with memcmp and a
cached token costs 4 bytes. Every method takes either a sequence of ids or packed bytes; a host
that routes many long prompts (the router process) should pass packed bytes, which skips the
conversion.
"""

from __future__ import annotations

import heapq
import itertools
from array import array
from collections import defaultdict
from collections.abc import Sequence

from sglang_fair.core.errors import ConfigError, require

TokenKey = bytes | Sequence[int]
WIDTH = 4  # bytes per packed token id


def pack_tokens(tokens: TokenKey) -> bytes:
    """Token ids as unsigned 32-bit little-endian bytes (bytes are returned as they are)."""
    if isinstance(tokens, bytes):
        # a constant message, not an f-string: this runs at every lookup, insert and removal
        require(len(tokens) % WIDTH == 0, "packed tokens must be a multiple of 4 bytes")
        return tokens
    try:
        packed = array("I", tokens)
    except OverflowError:
        raise ValueError("token ids must be in [0, 2**32)") from None
    if packed.itemsize != WIDTH or array("I", [1]).tobytes() != b"\x01\x00\x00\x00":
        packed = array("L", tokens)  # pragma: no cover - exotic platforms
    return packed.tobytes()


def unpack_tokens(packed: bytes) -> tuple[int, ...]:
    """The token ids of :func:`pack_tokens`'s bytes."""
    out = array("I")
    if out.itemsize != WIDTH:
        out = array("L")  # pragma: no cover - exotic platforms
    out.frombytes(packed)
    return tuple(out)


_NATIVE = array("I", [1]).tobytes() == b"\x01\x00\x00\x00"  # the platform's unsigned int is the packed layout


def token_view(packed: bytes) -> Sequence[int]:
    """The token ids of :func:`pack_tokens`'s bytes, read in place (no copy) where the platform's
    unsigned int is :func:`pack_tokens`'s layout, else copied out."""
    return memoryview(packed).cast("I") if _NATIVE else unpack_tokens(packed)


def token_count(tokens: TokenKey) -> int:
    return len(tokens) // WIDTH if isinstance(tokens, bytes) else len(tokens)


class GlobalNode:
    __slots__ = ("children", "key", "last_access", "length", "parent", "workers")

    def __init__(self, key: bytes, parent: GlobalNode | None, workers: int) -> None:
        self.key = key  # packed tokens of this edge
        self.length = len(key) // WIDTH  # tokens of this edge (kept: walks read it at every node)
        self.parent = parent
        self.workers = workers  # bit w set: worker w holds root..end of this node
        self.children: dict[bytes, GlobalNode] = {}  # by the first packed token of the child
        self.last_access = 0


def worker_set(mask: int) -> frozenset[int]:
    """The worker indices whose bits are set in ``mask``."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return frozenset(out)


def common_tokens(key: bytes, toks: bytes, off: int) -> int:
    """Number of leading tokens ``key`` shares with ``toks[off:]`` (byte offsets, token result)."""
    if toks.startswith(key, off):  # the common case, the whole edge: compared in place, no slice copied
        return len(key) // WIDTH
    n = min(len(key), len(toks) - off)
    if key[:n] == toks[off : off + n]:
        return n // WIDTH
    lo, hi = 0, n // WIDTH  # binary search on the length of the equal prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if key[: mid * WIDTH] == toks[off : off + mid * WIDTH]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class GlobalRadixTree:
    """Prefix -> workers map with longest-match lookup and LRU pruning past ``max_tokens``."""

    def __init__(self, max_tokens: int = 1 << 26) -> None:
        require(max_tokens > 0, f"max_tokens must be > 0, got {max_tokens}")
        self.max_tokens = max_tokens
        self.root = GlobalNode(b"", None, 0)
        self.tokens = 0
        self.nodes = 0
        self.worker_tokens: defaultdict[int, int] = defaultdict(int)  # tokens recorded per worker
        self._clock = itertools.count(1)
        # the last match_mask's packed tokens, the deepest node it matched whole and that node's end (a
        # byte offset): an insert of the same bytes object right after starts there; any change clears it
        self._cursor: tuple[bytes, GlobalNode, int] | None = None

    def longest_match(self, tokens: TokenKey) -> tuple[int, frozenset[int]]:
        """Length of the longest prefix of ``tokens`` any worker holds, and the workers holding it.

        Returns ``(0, frozenset())`` when no worker holds even the first token.
        """
        matched, mask = self.match_mask(tokens)
        return matched, worker_set(mask)

    def match_mask(self, tokens: TokenKey) -> tuple[int, int]:
        """:meth:`longest_match` with the holders as a bit mask (bit w set: worker w holds it): the
        router's hot path, one walk without a generator or a set. An :meth:`insert` of the same packed
        bytes right after it does not walk the matched path again."""
        return self._descend(pack_tokens(tokens), None)

    def match_lengths(self, tokens: TokenKey) -> dict[int, int]:
        """For every worker holding at least the first token of ``tokens``: how many leading tokens
        it holds (its own longest match; :meth:`longest_match` gives only the best one's)."""
        out: dict[int, int] = {}
        self._descend(pack_tokens(tokens), out)
        return out

    def _descend(self, toks: bytes, lengths: dict[int, int] | None) -> tuple[int, int]:
        """Down the path of packed ``toks``, touching each node: the tokens matched and the workers
        holding the last node reached; with ``lengths``, each holder's own match length on the way.
        Leaves the cursor :meth:`insert` starts from."""
        node, off, mask, now = self.root, 0, 0, next(self._clock)
        while off < len(toks):
            child = node.children.get(toks[off : off + WIDTH])
            if child is None or not child.workers:
                break
            child.last_access = now
            common = common_tokens(child.key, toks, off)
            mask = child.workers
            if lengths is not None:
                for w in worker_set(mask):
                    lengths[w] = off // WIDTH + common
            if common < child.length:
                self._cursor = (toks, node, off)
                return off // WIDTH + common, mask
            node, off = child, off + common * WIDTH
        self._cursor = (toks, node, off)
        return off // WIDTH, mask

    def insert(self, tokens: TokenKey, worker: int) -> int:
        """Record that ``worker`` now holds ``tokens`` (and so every prefix of it); return how many
        leading tokens it was already recorded as holding."""
        if worker < 0:  # not require(): its message would be formatted at every insert
            raise ConfigError(f"worker index must be >= 0, got {worker}")
        toks, bit, now = pack_tokens(tokens), 1 << worker, next(self._clock)
        cursor, self._cursor = self._cursor, None
        if cursor is not None and cursor[0] is toks:
            node, off = cursor[1], cursor[2]
            held, holding = self._claim_path(node, bit, now)
        else:
            node, off, held, holding = self.root, 0, 0, True
        while off < len(toks):
            child = node.children.get(toks[off : off + WIDTH])
            if child is None:
                leaf = GlobalNode(toks[off:], node, bit)
                leaf.last_access = now
                node.children[toks[off : off + WIDTH]] = leaf
                self.tokens += leaf.length
                self.worker_tokens[worker] += leaf.length
                self.nodes += 1
                break
            common = common_tokens(child.key, toks, off)
            if common < child.length:
                child = self._split(child, common)
            if not child.workers & bit:
                holding = False
                self.worker_tokens[worker] += child.length
            elif holding:
                held += common
            child.workers |= bit
            child.last_access = now
            node, off = child, off + common * WIDTH
        if self.tokens > self.max_tokens:  # prune to 90% so pruning is amortized, not per insert
            self._prune(self.tokens - self.max_tokens * 9 // 10)
        return held

    def _claim_path(self, node: GlobalNode, bit: int, now: int) -> tuple[int, bool]:
        """:meth:`insert`'s walk from the root down to ``node``, done upwards from it: sets ``bit`` and
        touches every node on the path; returns the tokens the worker already held on it and whether
        it held all of them (the nodes holding a worker are a prefix of any path)."""
        held, holding, worker = 0, node.workers & bit > 0 or node is self.root, bit.bit_length() - 1
        while node is not self.root:
            if node.workers & bit:
                held += node.length
            else:
                self.worker_tokens[worker] += node.length
                node.workers |= bit
            node.last_access = now
            node = node.parent  # type: ignore[assignment]
        return held, holding

    def remove(self, tokens: TokenKey, worker: int, start: int = 0) -> None:
        """Record that ``worker`` no longer holds ``tokens[start:]`` nor anything extending it."""
        self._cursor = None
        toks, bit = pack_tokens(tokens), 1 << worker
        n = len(toks) // WIDTH
        if not 0 <= start <= n:  # as in insert
            raise ConfigError(f"start {start} outside [0, {n}]")
        if start == n:
            return
        node, off, cut = self.root, 0, start * WIDTH
        while True:  # walk to the node that contains position ``start`` (byte offset ``cut``)
            child = node.children.get(toks[off : off + WIDTH])
            if child is None:
                return
            end = off + len(child.key)
            if end > cut:
                if common_tokens(child.key, toks, off) * WIDTH <= cut - off:
                    return  # the path diverges before ``start``: nothing of it is recorded
                if cut > off:
                    upper = self._split(child, (cut - off) // WIDTH)
                    child = upper.children[toks[cut : cut + WIDTH]]
                self._drop_worker(child, bit)
                return
            if not toks.startswith(child.key, off):  # an edge wholly before ``start`` must match whole
                return
            node, off = child, end

    def forget_worker(self, worker: int) -> None:
        """Drop everything recorded for ``worker`` (it died or restarted with an empty cache)."""
        self._cursor = None
        for child in list(self.root.children.values()):
            self._drop_worker(child, 1 << worker)

    def _drop_worker(self, top: GlobalNode, bit: int) -> None:
        worker = bit.bit_length() - 1
        stack = [top]
        while stack:
            node = stack.pop()
            if node.workers & bit:
                self.worker_tokens[worker] -= node.length
                node.workers &= ~bit
            stack.extend(node.children.values())
        stack = [top]
        while stack:  # remove nodes no worker holds any more
            node = stack.pop()
            if node.workers:
                stack.extend(node.children.values())
            else:
                self._unlink(node)

    def _unlink(self, node: GlobalNode) -> None:
        assert node.parent is not None
        del node.parent.children[node.key[:WIDTH]]
        stack = [node]
        while stack:
            cur = stack.pop()
            self.tokens -= cur.length
            self.nodes -= 1
            for w in worker_set(cur.workers):
                self.worker_tokens[w] -= cur.length
            stack.extend(cur.children.values())
            cur.children, cur.parent = {}, None  # no cycles left: reference counting frees it

    def _split(self, child: GlobalNode, at: int) -> GlobalNode:
        """Split ``child`` after ``at`` tokens; return the new upper node."""
        parent = child.parent
        assert parent is not None
        upper = GlobalNode(child.key[: at * WIDTH], parent, child.workers)
        upper.last_access = child.last_access
        child.key = child.key[at * WIDTH :]
        child.length -= at
        child.parent = upper
        upper.children[child.key[:WIDTH]] = child
        parent.children[upper.key[:WIDTH]] = upper
        self.nodes += 1
        return upper

    def _prune(self, n: int) -> None:
        """Drop least-recently-used leaves until ``n`` tokens are gone."""
        heap, stack = [], [self.root]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif node is not self.root:
                heap.append((node.last_access, id(node), node))
        heapq.heapify(heap)
        freed = 0
        while freed < n and heap:
            _, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            assert parent is not None
            freed += leaf.length
            self._unlink(leaf)
            if parent is not self.root and not parent.children:
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
