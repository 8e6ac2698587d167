"""Fair cache-aware routing: SGLang's cache-aware router, with D²LPM's per-client credit placing new work.

[1] Alg. 2 (``d2lpm``) charges a request's whole input to q[client][worker] at dispatch, refills by a
fixed Q^w and may send a request only where its client has credit. At paper scale one request (a QA
document) or one program (a ToT tree) costs more than Q^w, so a client's credit on the worker that caches
its prefix runs out inside a program, the next call goes where its context must be recomputed, and
SGLang's cache-aware router wins on throughput and latency (docs/results.md). This policy decides as the
cache-aware router does and keeps Alg. 2's counters only for the decision that has no locality at stake:

- **balance first** (``cache_aware.py``): when the queues are out of balance (max - min >
  ``balance_abs_threshold`` and max > ``balance_rel_threshold`` x min) the least-loaded worker gets r;
- **a program stays where its context is**: if the longest match covers more than ``cache_threshold``
  of the prompt, the least-loaded worker holding it gets r, whatever the client's credit there;
- **new work goes where the client has credit**: otherwise (a new prefix: a new program, document or
  conversation) r goes to the worker of G_avail (the live workers where q[client][w] > 0, after Alg. 2's
  refill when there are none) whose tree holds the fewest tokens (cache-aware's choice for new work);
- **charged what it costs there**: dispatch charges w_e x the tokens the chosen worker does not hold (by
  the global tree), the finish w_q x the output tokens, as DLPM charges on the worker itself;
- **a quantum sized to the client**: Q_c = max(Q^w, ``quantum_requests`` x the client's recent largest
  request input cost) x its weight, so one request never outspends a refill.

Fairness is enforced where [1] puts it: DLPM on every worker keeps two clients backlogged at every worker
within 2 |W| (U + Q^u) of each other (Thm 5.1, from Thm 4.1 on each worker; tested as a property with
LPM workers as its control). The router's part is the credit: the new work of a client is placed only
where it has credit, so, for the work the router places by credit, each client's charges at any two live
workers differ by less than Q_c plus one request (tested, with cache-aware routing as the control).
What it gives up against Alg. 2: a program's next call is never moved off its holder for lack of credit,
so a client whose every request continues one long prefix stays on one worker as under cache-aware
routing ([1] Thm A.5's sticky client); it is served there by DLPM against every other client on that
worker. With a quantum no client spends it routes exactly as ``cache_aware`` (tested).
"""

from __future__ import annotations

import math

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouterConfig, RouteRequest, least_loaded
from sglang_fair.routing.d2lpm import D2LPM

SIZE_DECAY = 0.98  # a client's remembered largest request shrinks by this per dispatch of it


class FairCacheAware(D2LPM):
    name = "fair_cache_aware"

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        self.sizes: dict[str, float] = {}  # per client: recent largest input cost of one request
        self.last_decision = ""  # "balance", "holder" or "credit", for tests and views

    def forget(self, client: str) -> None:
        super().forget(client)
        self.sizes.pop(client, None)

    def size_with(self, client: str, n: int) -> float:
        """The client's recent largest request input cost, counting one of ``n`` tokens now."""
        return max(self.config.cost.extend_cost(n), SIZE_DECAY * self.sizes.get(client, 0.0))

    def quantum(self, client: str, n: int | None = None) -> float:
        """Q_c: the client's refill per worker (with a request of ``n`` tokens at hand, if given)."""
        cfg = self.config
        size = self.sizes.get(client, 0.0) if n is None else self.size_with(client, n)
        return max(cfg.quantum, cfg.quantum_requests * size) * cfg.cost.weight(client)

    def choose(self, req: RouteRequest) -> int:
        return self._pick(req.client, self.held(req), token_count(req.tokens))

    def charge(self, req: RouteRequest, worker: int) -> None:
        """w_e x the tokens ``worker`` does not hold; the client's recent largest request."""
        n = token_count(req.tokens)
        self.sizes[req.client] = self.size_with(req.client, n)
        self.counters(req.client)[worker] -= self.config.cost.extend_cost(n - self.held(req).get(worker, 0))

    def _pick(self, client: str, held: dict[int, int], n: int) -> int:
        """SGLang's cache-aware rule (``cache_aware.py``), the client's credit placing new work: a
        cluster out of balance sends to the least-loaded live worker; a request whose longest match
        covers more than ``cache_threshold`` of its prompt goes to the least-loaded worker holding
        it (a program's next call stays where its context is, credit or not); anything else (a new
        prefix) goes to a worker where the client has credit (G_avail, refilled when empty), the one
        whose tree holds the fewest tokens."""
        cfg, queue, alive = self.config, self.queue, self.alive
        loads = [queue[w] for w in alive]
        high, low = max(loads), min(loads)
        if high - low > cfg.balance_abs_threshold and high > cfg.balance_rel_threshold * low:
            self.last_decision = "balance"
            return least_loaded(alive, queue)
        best = max((held.get(w, 0) for w in alive), default=0)
        if best > cfg.cache_threshold * max(1, n):
            self.last_decision = "holder"
            return least_loaded([w for w in alive if held.get(w, 0) == best], queue)
        self.last_decision = "credit"
        sizes = self.tree.worker_tokens
        return min(self.available(client, n), key=lambda w: (sizes[w], w))

    def available(self, client: str, n: int | None = None) -> list[int]:
        """G_avail: the live workers where ``client`` has credit, after Alg. 2's refill (lines 5-6,
        with the client's quantum, a request of ``n`` tokens at hand) if there were none."""
        q, alive = self.counters(client), self.alive
        available = [w for w in alive if q[w] > 0]
        if not available:
            quantum = self.quantum(client, n)
            rounds = min(math.floor(-q[w] / quantum) + 1 for w in alive)
            for w in self.workers:
                q[w] += rounds * quantum
            available = [w for w in alive if q[w] > 0]
        return available
