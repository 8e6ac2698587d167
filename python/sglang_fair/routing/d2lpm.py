"""Double Deficit LPM: Algorithm 2 of [1] (Cao et al.), the global half of D²LPM.

Per (client, worker) deficit counters q[i][w], starting at 0. For a request r of client i:
G = workers holding the longest match of r in the global tree (line 13); G_avail = workers with
q[i][w] > 0, and while G_avail is empty every q[i][w] gains Q^w (lines 4-6); the least-queued worker
of G ∩ G_avail gets r, else the least-queued worker of G_avail (lines 7-8). Dispatch charges
w_e * |input| to q[i][w], adds 1 to the queue size and inserts r's tokens into the global tree for w
(lines 15-18); a finish charges w_q * output tokens and subtracts 1 (lines 22-23); evictions prune
the tree (line 27). Weighted as DLPM is: a refill gives Q^w times the client's weight. Workers run
DLPM locally; together they keep backlogged clients within
2 |W| (U + Q^u) of each other ([1] Thm 5.1).
"""

from __future__ import annotations

import math

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouterConfig, RouteRequest, RoutingPolicy, least_loaded


class D2LPM(RoutingPolicy):
    name = "d2lpm"
    uses_tree = True

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        self.deficits: dict[str, list[float]] = {}

    def counters(self, client: str) -> list[float]:
        """q[client][w] for every worker (created at 0 for a new client)."""
        if client not in self.deficits:
            self.deficits[client] = [0.0] * len(self.workers)
        return self.deficits[client]

    def counter_view(self) -> dict[str, list[float]]:
        return {client: list(q) for client, q in self.deficits.items()}

    def choose(self, req: RouteRequest) -> int:
        quantum = self.config.quantum * self.config.cost.weight(req.client)
        return self.pick(req, self.refilled(req.client, quantum))

    def refilled(self, client: str, quantum: float) -> list[int]:
        """G_avail: the live workers where ``client`` has credit, after Alg. 2's refill (lines 5-6, all
        rounds of ``quantum`` at once: the fewest that suffice) if there were none."""
        q, alive = self.counters(client), self.alive
        available = [w for w in alive if q[w] > 0]
        if not available:
            rounds = min(math.floor(-q[w] / quantum) + 1 for w in alive)
            for w in self.workers:
                q[w] += rounds * quantum
            available = [w for w in alive if q[w] > 0]
        return available

    def charge(self, req: RouteRequest, worker: int) -> None:
        """Line 15: q[client][worker] -= w_e * |input|."""
        self.counters(req.client)[worker] -= self.config.cost.extend_cost(token_count(req.tokens))

    def pick(self, req: RouteRequest, available: list[int]) -> int:
        """Lines 7-8 and 13: the least-queued worker of G ∩ G_avail, else of G_avail (``available``,
        the live workers where the client's counter is positive; never empty)."""
        holders = self.tree.match_mask(req.tokens)[1]
        candidates = [w for w in available if holders >> w & 1]
        return least_loaded(candidates or available, self.queue)

    def forget(self, client: str) -> None:
        self.deficits.pop(client, None)

    def on_finish(self, worker: int, client: str, output_tokens: int) -> None:
        super().on_finish(worker, client, output_tokens)
        self.counters(client)[worker] -= self.config.cost.output_cost(output_tokens)
