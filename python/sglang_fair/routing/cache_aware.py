"""Cache-aware routing as the SGLang router does it.

cache_aware: the load is each worker's unfinished requests. When the load is imbalanced
(max - min > balance_abs_threshold and max > balance_rel_threshold * min) the least loaded worker
gets the request; otherwise, if the longest cached match covers more than cache_threshold of the
prompt, the matching worker gets it (the least loaded of them on ties); otherwise the worker whose
tree holds the fewest tokens (the most room to cache something new). Defaults are the router's:
0.3, 64, 1.5.
"""

from __future__ import annotations

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouteRequest, RoutingPolicy, least_loaded


class CacheAware(RoutingPolicy):
    name = "cache_aware"
    uses_tree = True

    def choose(self, req: RouteRequest) -> int:
        cfg, queue = self.config, self.queue
        loads = [queue[w] for w in self.alive]
        high, low = max(loads), min(loads)
        if high - low > cfg.balance_abs_threshold and high > cfg.balance_rel_threshold * low:
            return least_loaded(self.alive, queue)
        matched, holders = self.tree.longest_match(req.tokens)
        if holders and matched / max(1, token_count(req.tokens)) > cfg.cache_threshold:
            return least_loaded(holders, queue)
        sizes = self.tree.worker_tokens
        return min(self.alive, key=lambda w: (sizes[w], w))

