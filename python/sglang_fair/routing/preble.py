"""Preble's E2 global scheduler (Srivatsa et al., "Preble: Efficient Distributed Prompt Scheduling
for LLM Serving", ICLR 2025; the baseline of [1] §6.1), as far as the routing interface allows.

For a request of n tokens, the global tree gives each worker's cached match m_w:

- **exploit** when the best match covers at least ``preble_threshold`` of the prompt (Preble: the
  cached part is at least the part still to compute, i.e. 0.5): among the workers holding that
  longest match, the one with the least load L_w;
- **explore** otherwise: the worker with the least L_w + P_w, P_w = w_e * (n - m_w) the prefill the
  request would cost there;
- **post-assignment rebalancing**: once ``REBALANCE_AFTER`` requests were routed, a choice whose
  load is at least ``preble_balance`` (Preble: 1.5) times the lightest worker's goes to the
  lightest worker instead.

The load L_w is Preble's windowed load: over the last ``preble_window`` dispatches, the prefill cost
of those sent to w (w_e * their uncached tokens at dispatch) plus their estimated decode cost
(w_q * the mean output length of the requests finished so far, Preble's per-prefix decode
estimate pooled over prefixes). Costs are in the cost model's units, a linear proxy for time.

Left out, because the routing interface does not carry what they need: Preble's time-based
history window (3 minutes; here a window of dispatches: routing never reads a clock), its eviction
cost M_w (the recomputation of what w would evict; the router does not know workers' pool sizes),
fitted prefill-time and per-GPU TPOT estimates (here the cost model), prefix autoscaling
(replicating a prefix whose queueing delay doubled; no latency reaches the router), and
rebalancing by moving whole prefix subtrees (here: redirecting the request at hand). The local
half of Preble, its priority wait queue, is the ``preble`` admission policy (admission/preble.py).
"""

from __future__ import annotations

from collections import deque

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouterConfig, RouteRequest, RoutingPolicy

REBALANCE_AFTER = 50  # Preble rebalances only once 50 requests were routed


class Preble(RoutingPolicy):
    name = "preble"
    uses_tree = True

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        n = config.num_workers
        self.history: deque[tuple[int, float]] = deque()  # (worker, prefill cost) of recent dispatches
        self.window_prefill = [0.0] * n
        self.window_count = [0] * n
        self.outputs = 0  # output tokens of finished requests
        self.finished = 0
        self.routed = 0
        self.last_decision = ""  # "exploit", "explore" or "rebalance", for tests and views

    def load(self, worker: int) -> float:
        """L_w: windowed prefill cost plus estimated decode cost of the requests sent to ``worker``."""
        mean_out = self.outputs / self.finished if self.finished else 0.0
        decode = self.config.cost.w_q * mean_out
        return self.window_prefill[worker] + self.window_count[worker] * decode

    def choose(self, req: RouteRequest) -> int:
        n = max(1, token_count(req.tokens))
        held = self.held(req)
        match = {w: held.get(w, 0) for w in self.alive}
        best = max(match.values())
        loads = {w: self.load(w) for w in self.alive}
        if best > 0 and best / n >= self.config.preble_threshold:
            worker = min((w for w in self.alive if match[w] == best), key=lambda w: (loads[w], w))
            self.last_decision = "exploit"
        else:
            cost = self.config.cost
            worker = min(self.alive, key=lambda w: (loads[w] + cost.extend_cost(n - match[w]), w))
            self.last_decision = "explore"
        lightest = min(self.alive, key=lambda w: (loads[w], w))
        if self.routed >= REBALANCE_AFTER and loads[worker] > 0 and \
                loads[worker] >= self.config.preble_balance * loads[lightest] and worker != lightest:
            worker = lightest
            self.last_decision = "rebalance"
        return worker

    def charge(self, req: RouteRequest, worker: int) -> None:
        """The dispatch joins the load window with its prefill cost there."""
        n = max(1, token_count(req.tokens))
        prefill = self.config.cost.extend_cost(n - self.held(req).get(worker, 0))
        self.routed += 1
        self.history.append((worker, prefill))
        self.window_prefill[worker] += prefill
        self.window_count[worker] += 1
        while len(self.history) > self.config.preble_window:
            old, cost = self.history.popleft()
            self.window_prefill[old] -= cost
            self.window_count[old] -= 1

    def on_finish(self, worker: int, client: str, output_tokens: int) -> None:
        super().on_finish(worker, client, output_tokens)
        self.outputs += output_tokens
        self.finished += 1
