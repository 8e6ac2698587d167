"""The router's global radix tree: which workers hold which prefixes (000 §5, Alg. 2).

Each node records, as a bit mask, the workers that hold the whole path from the root to the node's
end; a worker that holds a prefix holds every shorter one, so a child's mask is a subset of its
parent's. The tree is bounded: past ``max_tokens`` it prunes least-recently-used leaves (a logical
clock, no wall clock) down to 90% of the bound, which only makes the router forget, never route
wrongly.
"""

from __future__ import annotations

import heapq
import itertools
from collections import defaultdict
from collections.abc import Sequence

from sglang_fair.core.errors import require
from sglang_fair.core.radix_cache import as_token_list, common_len


class GlobalNode:
    __slots__ = ("children", "key", "last_access", "parent", "workers")

    def __init__(self, key: list[int], parent: GlobalNode | None, workers: int) -> None:
        self.key = key
        self.parent = parent
        self.workers = workers  # bit w set: worker w holds root..end of this node
        self.children: dict[int, GlobalNode] = {}
        self.last_access = 0


def worker_set(mask: int) -> frozenset[int]:
    """The worker indices whose bits are set in ``mask``."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return frozenset(out)


class GlobalRadixTree:
    """Prefix -> workers map with longest-match lookup and LRU pruning past ``max_tokens``."""

    def __init__(self, max_tokens: int = 1 << 26) -> None:
        require(max_tokens > 0, f"max_tokens must be > 0, got {max_tokens}")
        self.max_tokens = max_tokens
        self.root = GlobalNode([], None, 0)
        self.tokens = 0
        self.nodes = 0
        self.worker_tokens: defaultdict[int, int] = defaultdict(int)  # tokens recorded per worker
        self._clock = itertools.count(1)

    def longest_match(self, tokens: Sequence[int]) -> tuple[int, frozenset[int]]:
        """Length of the longest prefix of ``tokens`` any worker holds, and the workers holding it.

        Returns ``(0, frozenset())`` when no worker holds even the first token.
        """
        length, mask = self._match(as_token_list(tokens))
        return length, worker_set(mask)

    def _match(self, tokens: list[int]) -> tuple[int, int]:
        node, pos, mask, now = self.root, 0, 0, next(self._clock)
        while pos < len(tokens):
            child = node.children.get(tokens[pos])
            if child is None or not child.workers:
                break
            child.last_access = now
            common = common_len(child.key, tokens, pos)
            pos, mask = pos + common, child.workers
            if common < len(child.key):
                break
            node = child
        return pos, mask

    def insert(self, tokens: Sequence[int], worker: int) -> None:
        """Record that ``worker`` now holds ``tokens`` (and so every prefix of it)."""
        require(worker >= 0, f"worker index must be >= 0, got {worker}")
        toks, bit, now = as_token_list(tokens), 1 << worker, next(self._clock)
        node, pos = self.root, 0
        while pos < len(toks):
            child = node.children.get(toks[pos])
            if child is None:
                leaf = GlobalNode(toks[pos:], node, bit)
                leaf.last_access = now
                node.children[toks[pos]] = leaf
                self.tokens += len(leaf.key)
                self.worker_tokens[worker] += len(leaf.key)
                self.nodes += 1
                break
            common = common_len(child.key, toks, pos)
            if common < len(child.key):
                child = self._split(child, common)
            if not child.workers & bit:
                self.worker_tokens[worker] += len(child.key)
            child.workers |= bit
            child.last_access = now
            node, pos = child, pos + common
        if self.tokens > self.max_tokens:  # prune to 90% so pruning is amortized, not per insert
            self._prune(self.tokens - self.max_tokens * 9 // 10)

    def remove(self, tokens: Sequence[int], worker: int, start: int = 0) -> None:
        """Record that ``worker`` no longer holds ``tokens[start:]`` nor anything extending it."""
        toks, bit = as_token_list(tokens), 1 << worker
        require(0 <= start <= len(toks), f"start {start} outside [0, {len(toks)}]")
        if start == len(toks):
            return
        node, pos = self.root, 0
        while True:  # walk to the node that contains position ``start``
            child = node.children.get(toks[pos])
            if child is None:
                return
            common = common_len(child.key, toks, pos)
            if pos + len(child.key) > start:
                if common <= start - pos:
                    return  # the path diverges before ``start``: nothing of it is recorded
                if start > pos:
                    child = self._split(child, start - pos).children[toks[start]]
                self._drop_worker(child, bit)
                return
            if common < len(child.key):
                return
            node, pos = child, pos + len(child.key)

    def forget_worker(self, worker: int) -> None:
        """Drop everything recorded for ``worker`` (it died or restarted with an empty cache)."""
        for child in list(self.root.children.values()):
            self._drop_worker(child, 1 << worker)

    def _drop_worker(self, top: GlobalNode, bit: int) -> None:
        stack = [top]
        while stack:
            node = stack.pop()
            if node.workers & bit:
                self.worker_tokens[bit.bit_length() - 1] -= len(node.key)
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
        del node.parent.children[node.key[0]]
        stack = [node]
        while stack:
            cur = stack.pop()
            self.tokens -= len(cur.key)
            self.nodes -= 1
            for w in worker_set(cur.workers):
                self.worker_tokens[w] -= len(cur.key)
            stack.extend(cur.children.values())

    def _split(self, child: GlobalNode, at: int) -> GlobalNode:
        parent = child.parent
        assert parent is not None
        upper = GlobalNode(child.key[:at], parent, child.workers)
        upper.last_access = child.last_access
        child.key = child.key[at:]
        child.parent = upper
        upper.children[child.key[0]] = child
        parent.children[upper.key[0]] = upper
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
            freed += len(leaf.key)
            self._unlink(leaf)
            if parent is not self.root and not parent.children:
                heapq.heappush(heap, (parent.last_access, id(parent), parent))
