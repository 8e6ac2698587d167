"""A worker's waiting queue, with prefix matches and the LPM order kept incrementally.

A policy that orders by the cached prefix (``orders_by_cache``) gets the queue in LPM order
(:class:`~sglang_fair.admission.lpm.LpmOrdered`, so ``lpm_order`` does not sort) with every
``cached_len`` current. Only requests whose match can have changed are matched again, by the rules
of the SGLang plugin's :class:`~sglang_fair.sglang_plugin.match_index.MatchIndex`, fed by the
cache's own notifications (:class:`~sglang_fair.core.radix_cache.CacheListener`):

* new requests (arrivals, retracted requests back in the queue);
* after an insert below node n that found p tokens cached: the requests whose match ends at n
  (exactly p tokens, on that path) and whose next token is the insert's next token;
* after the eviction of node n: the requests whose match ended at n (only leaves are evicted, and a
  match ends on a node boundary that splits keep: a match shrinks only when its last node goes).

Each update costs O(log queue) plus one list move (:class:`~sglang_fair.admission.lpm.LpmQueue`).

Matching refreshes LRU recency in the cache, so which requests are matched shapes eviction. The
simulator models SGLang with this project's plugin: waiting requests are matched only when their
match can have changed (as the plugin's MatchIndex does), and not at all for policies that do not
order by the cache (SGLang's fcfs does not match; the plugin matches only for cache-ordered
policies). Requests the budget tries are matched again there, as SGLang's ``init_next_round_input``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from sglang_fair.admission.lpm import LpmQueue
from sglang_fair.core.buckets import unlink
from sglang_fair.core.global_tree import WIDTH
from sglang_fair.core.radix_cache import CacheNode, LocalRadixCache
from sglang_fair.sim.request import EngineRequest

Stop = tuple[CacheNode, bytes]  # (node a match ends at, the request's next token, packed)


class WaitingQueue:
    """Waiting requests in arrival (queue) order; LPM order and matches if ``by_cache``."""

    def __init__(self, cache: LocalRadixCache, by_cache: bool) -> None:
        self.cache = cache
        self.by_cache = by_cache
        self._reqs: dict[int, EngineRequest] = {}  # rid -> request, in queue order
        self._lpm: LpmQueue[EngineRequest] = LpmQueue()
        self._pending: dict[int, EngineRequest] = {}  # to match at the next refresh
        self._entry: dict[int, tuple[CacheNode, Stop | None]] = {}
        self._by_node: defaultdict[CacheNode, set[int]] = defaultdict(set)
        self._by_stop: defaultdict[Stop, set[int]] = defaultdict(set)
        self.matches = 0  # tree matches done, for tests and the benchmark
        if by_cache:
            cache.listener = self

    def __len__(self) -> int:
        return len(self._reqs)

    def __bool__(self) -> bool:
        return bool(self._reqs)

    def __iter__(self) -> Iterator[EngineRequest]:
        return iter(list(self._reqs.values()))

    def append(self, req: EngineRequest) -> None:
        self._reqs[req.rid] = req
        if self.by_cache:
            self._pending[req.rid] = req

    def remove(self, reqs: list[EngineRequest]) -> None:
        for req in reqs:
            rid = req.rid
            del self._reqs[rid]
            if self.by_cache:
                self._lpm.remove(rid)
                self._pending.pop(rid, None)
                self._unindex(rid)

    def view(self) -> list[EngineRequest]:
        """What a policy's ``select`` gets: the queue, in LPM order with current matches if ``by_cache``."""
        if not self.by_cache:
            return list(self._reqs.values())
        self.refresh()
        return self._lpm.ordered()

    def refresh(self) -> None:
        """Match the pending requests (once per distinct prompt) and move them in the LPM order."""
        memo: dict[int, tuple[int, CacheNode]] = {}
        pending, self._pending = self._pending, {}
        for rid, req in pending.items():
            key = id(req.key) if req.key is not None else None
            hit = memo.get(key) if key is not None else None
            if hit is None:
                hit = self.cache.match_prefix(req.packed)
                self.matches += 1
                if key is not None:
                    memo[key] = hit
            req.cached_len, node = hit
            self._unindex(rid)
            at = req.cached_len * WIDTH
            stop = (node, req.packed[at : at + WIDTH]) if at < len(req.packed) else None
            self._entry[rid] = (node, stop)
            self._by_node[node].add(rid)
            if stop is not None:
                self._by_stop[stop].add(rid)
            self._lpm.push(req)

    def _unindex(self, rid: int) -> None:
        entry = self._entry.pop(rid, None)
        if entry is None:
            return
        node, stop = entry
        unlink(self._by_node, node, rid)
        if stop is not None:
            unlink(self._by_stop, stop, rid)

    def _stale(self, rids: set[int] | None) -> None:
        for rid in rids or ():
            self._pending[rid] = self._reqs[rid]

    # ---- CacheListener ---------------------------------------------------------------------------
    def on_insert(self, tokens: bytes, cached: int, node: CacheNode) -> None:
        self._stale(self._by_stop.get((node, tokens[cached * WIDTH : (cached + 1) * WIDTH])))

    def on_evict(self, node: CacheNode) -> None:
        self._stale(self._by_node.get(node))
