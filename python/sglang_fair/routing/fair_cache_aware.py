"""Fair cache-aware routing: SGLang's cache-aware router in units of each worker's capacity, each client's
work spread over the workers, and D²LPM's per-client credit placing new work.

[1] Alg. 2 (``d2lpm``) charges a request's whole input to q[client][worker] at dispatch and may send it only
where its client has credit, so at paper scale a program's next call often goes where its context must be
recomputed. SGLang's cache-aware router keeps contexts where they are, but balances only when queues
differ by 64 requests and 1.5x: a hot prefix (a system prompt most traffic shares) stays on one worker while
the others idle, and clients placed by their prompts are served per worker, not across workers. For a
request r of client c, this policy decides:

1. **Among the workers not overfilled.** A worker's fill is its requests in flight per request it runs at
   once (c_w, learned from its load reports and at most its measured knee: ``routing/base.py``); above 1,
   requests wait there or add little service. Only the workers filled at most ``spill_ratio`` x the least
   fill + ``spill_slack`` are candidates. A holder of a hot prefix that fills up sends the next request to
   the least-filled worker, which then holds the prefix too: the prefix spreads to as many workers as its
   load needs and no more, at any cap and on any hardware.
2. **Locality.** If the longest match among the candidates covers more than ``hold_threshold`` of the
   prompt, a holder of it gets r: the one where c has the least of its work in flight (per request it
   runs), then the least filled. A program stays where its context is, and the clients of a shared prompt
   spread over every worker that holds it, so they are served across workers, not per worker. A client
   with more than ``spread_backlog`` x c_w in flight at that holder and none at another candidate goes
   to the least filled such worker: clients placed by their own prompts are not partitioned onto workers.
3. **New work goes where c has credit.** Otherwise (a new program, document or conversation) r goes to a
   candidate where q[c][w] > 0 (G_avail, refilled as Alg. 2 does when there is none), the one where c has the
   least in flight, then (for a client that never had two requests in flight at once) the worker of its last
   request, where its return is awaited (``dlpm_light``'s change 4), then the one whose tree holds the fewest
   tokens (cache-aware's choice for new work).
4. **Charged what it costs there**: dispatch charges w_e x the tokens the chosen worker does not hold (by the
   global tree), the finish w_q x the output tokens, as DLPM charges on the worker itself.
5. **A quantum in time**: Q_c = max(``quantum_s`` x a worker's measured service rate (reported with its load),
   ``quantum_requests`` x c's recent largest request) x c's weight; Q^w units before any report.

Fairness is enforced where [1] puts it: DLPM on every worker keeps two clients backlogged at every worker
within 2 |W| (U + Q^u) of each other (Thm 5.1, from Thm 4.1 on each worker; tested as a property with LPM
workers as its control). The router's parts, each tested with a control: for the work it places by credit,
each client's charges at any two live workers differ by less than Q_c plus one request (about ``quantum_s``
seconds of a worker's service); and while requests only arrive, no worker is filled more than
``spill_ratio`` x the least fill + ``spill_slack`` + one request. What it gives up against Alg. 2: a
program's next call is never moved off its holder for lack of credit (only for fill), so a client whose
every request continues one long prefix stays on its holders ([1] Thm A.5's sticky client), served there
by DLPM against every other client on them.
"""

from __future__ import annotations

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouterConfig, RouteRequest
from sglang_fair.routing.d2lpm import D2LPM

SIZE_DECAY = 0.98  # a client's remembered largest request shrinks by this per dispatch of it


class FairCacheAware(D2LPM):
    name = "fair_cache_aware"

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        self.sizes: dict[str, float] = {}  # per client: recent largest input cost of one request
        self.inflight: dict[str, list[int]] = {}  # per client: its requests in flight at each worker
        self.last_worker: dict[str, int] = {}  # per client: where its last request went
        self.streams: set[str] = set()  # clients that had more than one request in flight at once
        self.last_decision = ""  # "holder", "spread" or "credit", for tests and views

    def forget(self, client: str) -> None:
        super().forget(client)
        self.sizes.pop(client, None)
        self.inflight.pop(client, None)
        self.last_worker.pop(client, None)
        self.streams.discard(client)

    def size_with(self, client: str, n: int) -> float:
        """The client's recent largest request input cost, counting one of ``n`` tokens now."""
        return max(self.config.cost.extend_cost(n), SIZE_DECAY * self.sizes.get(client, 0.0))

    def quantum(self, client: str, n: int | None = None) -> float:
        """Q_c: the client's refill per worker (with a request of ``n`` tokens at hand, if given)."""
        cfg = self.config
        size = self.sizes.get(client, 0.0) if n is None else self.size_with(client, n)
        rate = self.service_rate()
        base = cfg.quantum_s * rate if cfg.quantum_s and rate else cfg.quantum
        return max(base, cfg.quantum_requests * size) * cfg.cost.weight(client)

    def choose(self, req: RouteRequest) -> int:
        return self._pick(req.client, self.held(req), token_count(req.tokens))

    def charge(self, req: RouteRequest, worker: int) -> None:
        """w_e x the tokens ``worker`` does not hold; the client's work in flight there; its recent
        largest request."""
        self.inflight.setdefault(req.client, [0] * len(self.workers))[worker] += 1
        self.last_worker[req.client] = worker
        if sum(self.inflight[req.client]) > 1:
            self.streams.add(req.client)
        n = token_count(req.tokens)
        self.sizes[req.client] = self.size_with(req.client, n)
        self.counters(req.client)[worker] -= self.config.cost.extend_cost(n - self.held(req).get(worker, 0))

    def on_finish(self, worker: int, client: str, output_tokens: int) -> None:
        super().on_finish(worker, client, output_tokens)
        mine = self.inflight.get(client)
        if mine and mine[worker] > 0:
            mine[worker] -= 1

    def mark_dead(self, worker: int) -> None:
        super().mark_dead(worker)
        for mine in self.inflight.values():
            mine[worker] = 0

    def candidates(self) -> list[int]:
        """The live workers filled at most ``spill_ratio`` x the least fill + ``spill_slack``."""
        cfg, fills = self.config, {w: self.fill(w) for w in self.alive}
        bound = cfg.spill_ratio * min(fills.values()) + cfg.spill_slack
        return [w for w, f in fills.items() if f <= bound]

    def _pick(self, client: str, held: dict[int, int], n: int) -> int:
        """Among the candidates, locality, then the client's credit (module docstring)."""
        ok = self.candidates()
        mine = self.inflight.get(client)

        def share(w: int) -> float:  # the client's work in flight there, per request the worker runs
            return mine[w] / self.capacity[w] if mine else 0.0

        credit = [w for w in self.available(client, n) if w in ok]
        best = max(held.get(w, 0) for w in ok)
        if best > self.config.hold_threshold * max(1, n):
            self.last_decision = "holder"
            holders = [w for w in ok if held.get(w, 0) == best]
            chosen = min(holders, key=lambda w: (share(w), self.fill(w), w))
            absent = [w for w in ok if mine is not None and mine[w] == 0]
            spread = self.config.spread_backlog
            if spread and absent and mine is not None and mine[chosen] > spread * self.capacity[chosen]:
                self.last_decision = "spread"  # c waits at its holder and is absent elsewhere
                return min(absent, key=lambda w: (self.fill(w), w))
            return chosen
        self.last_decision = "credit"
        sizes = self.tree.worker_tokens
        back = None if client in self.streams else self.last_worker.get(client)  # one at a time: back
        return min(credit or ok, key=lambda w: (share(w), w != back, sizes[w], w))

    def available(self, client: str, n: int | None = None) -> list[int]:
        """G_avail after Alg. 2's refill with the client's quantum (a request of ``n`` tokens at hand)."""
        return self.refilled(client, self.quantum(client, n))
