"""Routing by FairBatching's prefill admission budget ([3] §3.4): each worker reports the prefill
tokens it can still take within its TTFT target; the router sends a request to a worker whose budget
covers its prompt (the largest such budget; if none, the largest budget) and takes the prompt off
its local view of that budget until the next report. Workers not heard from count as unbounded, and
so does a worker that died and came back (its reports start again). Served: SGLang workers report
from ``sglang_plugin/pab_report.py`` in their heartbeats (``Heartbeat.prefill_budget``); simulated
FairBatching workers after every step."""

from __future__ import annotations

import math

from sglang_fair.core.global_tree import token_count
from sglang_fair.routing.base import RouterConfig, RouteRequest, RoutingPolicy


class PrefillBudget(RoutingPolicy):
    name = "pab"

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        self.budget = [math.inf] * config.num_workers

    def on_prefill_budget(self, worker: int, tokens: float) -> None:
        self.budget[worker] = tokens

    def mark_dead(self, worker: int) -> None:
        super().mark_dead(worker)
        self.budget[worker] = math.inf

    def choose(self, req: RouteRequest) -> int:
        need = token_count(req.tokens)
        fits = [w for w in self.alive if self.budget[w] >= need]
        return max(fits or self.alive, key=lambda w: (self.budget[w], -self.queue[w], -w))

    def charge(self, req: RouteRequest, worker: int) -> None:
        self.budget[worker] -= token_count(req.tokens)
