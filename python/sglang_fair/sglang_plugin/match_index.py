"""Incremental prefix matching of the waiting queue against SGLang's radix cache.

DLPM orders the waiting queue by the prefix each request finds in the radix cache. Matching every
waiting request at every scheduler step costs O(queue) tree walks; a request's match can only
change when the tree changes along its path, so :class:`MatchIndex` re-matches only:

* requests it has not matched yet (new arrivals, retracted requests back in the queue);
* after an **insert** of key K that found the first p tokens already cached: the requests whose
  match is exactly p tokens and whose next page is K's next page (index ``by_next``). A request
  whose path follows K beyond p matched exactly p before the insert (the tree held K[:p] and no
  child along K), so no other request can gain;
* after the **eviction** (or demotion to host) of node n: the requests whose match ended at n
  (index ``by_node``). SGLang evicts leaves only, and a match ends on a node boundary (the match
  splits the node; a split keeps the lower part's id), so a match shrinks only when its last node
  goes;
* everything, after a change it cannot follow (a reset, a subtree dropped, a load back from host).

The hooks in :mod:`hooks` forward the tree's inserts and evictions here. It is used only for
caches where these rules are complete (:func:`supported`: UnifiedRadixCache itself, not a subclass,
full attention only, no host tier, no storage linker, no EAGLE bigram keys); otherwise every waiting
request is matched every step.
A request the budget tried but did not admit was matched afresh by ``init_next_round_input``, and is
re-indexed from that match (:meth:`adopt`).
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Hashable, Iterable
from typing import Any

from sglang_fair.core.buckets import unlink

INDEX_ATTR = "_sglang_fair_match_index"


def supported(tree: Any) -> bool:
    """True if :class:`MatchIndex` sees every change of ``tree`` that can move a match."""
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    if type(tree) is not UnifiedRadixCache or getattr(tree, "disable", True):  # subclasses: LMCache, ...
        return False
    components = tuple(getattr(c, "name", str(c)) for c in getattr(tree, "tree_components", ()))
    return (
        components == ("FULL",)
        and getattr(tree, "cache_controller", None) is None
        and getattr(tree, "linker", None) is None
        and not getattr(tree, "is_eagle", False)
    )


def _next_key(token_ids: Any, limit: int | None, start: int, page: int, extra: Any) -> tuple[Any, ...] | None:
    """The namespace and first ``start + page`` tokens, or None if the key has no full page there."""
    n = len(token_ids) if limit is None else min(len(token_ids), limit)
    if start + page > n:
        return None
    head = token_ids[: start + page]
    return (*extra, (head if isinstance(head, array) else array("q", head)).tobytes())


class MatchIndex:
    """Which waiting requests a change of the radix tree can affect (see the module docstring)."""

    def __init__(self, page_size: int = 1) -> None:
        self.page = max(1, int(page_size))
        self.entries: dict[Hashable, tuple[Any, Any, tuple[Any, ...] | None]] = {}  # rid -> (req, node, next)
        self.by_next: defaultdict[tuple[Any, ...], set[Hashable]] = defaultdict(set)
        self.by_node: defaultdict[Any, set[Hashable]] = defaultdict(set)
        self.pending: dict[Hashable, Any] = {}  # rid -> req, to match at the next refresh
        self.matches = 0  # tree matches done, for the benchmark and tests

    # ---- requests -------------------------------------------------------------------------------
    def add(self, req: Any) -> None:
        """``req`` joined the waiting queue (or must be matched again)."""
        self.pending[req.rid] = req

    def discard(self, rid: Hashable) -> None:
        """The request left the waiting queue."""
        self.pending.pop(rid, None)
        entry = self.entries.pop(rid, None)
        if entry is None:
            return
        _, node, nxt = entry
        unlink(self.by_node, node, rid)
        if nxt is not None:
            unlink(self.by_next, nxt, rid)

    def adopt(self, req: Any) -> None:
        """``req`` was just matched by SGLang itself: index that match."""
        self.discard(req.rid)
        self._index(req)

    def refresh(self, tree: Any) -> list[Any]:
        """Match the pending requests against ``tree``; return them (their prefix_len is current)."""
        from sglang.srt.mem_cache.common import match_kv_cache

        done = list(self.pending.values())
        self.pending.clear()
        for req in done:
            self.discard(req.rid)
            match_kv_cache(req, tree)
            self._index(req)
        self.matches += len(done)
        return done

    def _index(self, req: Any) -> None:
        m = int(req.prefix_len or 0)
        tokens = req.origin_input_ids + req.output_ids
        nxt = _next_key(tokens, None, m, self.page, (req.extra_key, req.cache_salt or None))
        node = req.last_node
        self.entries[req.rid] = (req, node, nxt)
        self.by_node[node].add(req.rid)
        if nxt is not None:
            self.by_next[nxt].add(req.rid)

    # ---- tree changes ---------------------------------------------------------------------------
    def _stale(self, rids: Iterable[Hashable]) -> None:
        for rid in list(rids):
            entry = self.entries.get(rid)
            if entry is not None:
                self.pending[rid] = entry[0]

    def on_insert(self, key: Any, prefix_len: int) -> None:
        nxt = _next_key(key.token_ids, key.limit, int(prefix_len), self.page, (key.extra_key, key.cache_salt))
        if nxt is not None and nxt in self.by_next:
            self._stale(self.by_next[nxt])

    def on_node_gone(self, node: Any) -> None:
        if node in self.by_node:
            self._stale(self.by_node[node])

    def on_unknown_change(self) -> None:
        self._stale(self.entries)


def unified_radix_cache(kv_tokens: int, page_size: int = 1) -> tuple[Any, Any]:
    """SGLang's serving-path radix cache (``UnifiedRadixCache``, default tree core: Rust) over a
    small CPU KV pool, as the scheduler builds it; returns (cache, allocator) (for the tests and
    ``sglang-fair lab plugin-speed``). Needs a published server config
    (``set_global_server_args_for_scheduler``) in the process."""
    import torch
    from sglang.srt.mem_cache.allocator import TokenToKVPoolAllocator
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
    from sglang.srt.mem_cache.unified_cache.components.base import ComponentType
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

    req_pool = ReqToTokenPool(size=64, max_context_len=8192, device="cpu", enable_memory_saver=False)
    kv = MHATokenToKVPool(size=kv_tokens, page_size=page_size, dtype=torch.bfloat16, head_num=1, head_dim=8,
                          layer_num=1, device="cpu", enable_memory_saver=False)
    allocator = TokenToKVPoolAllocator(size=kv_tokens, dtype=torch.bfloat16, device="cpu", kvcache=kv,
                                       need_sort=False)
    params = CacheInitParams(req_to_token_pool=req_pool, token_to_kv_pool_allocator=allocator,
                             page_size=page_size, disable=False, tree_components=(ComponentType.FULL,))
    return UnifiedRadixCache(params=params), allocator
