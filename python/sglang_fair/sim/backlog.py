"""The fairness property of the papers, measured: service differences over backlogged intervals.

A :class:`BacklogRecorder` samples, at every step, each client's service so far (the cost of the
work the workers did for it, divided by its weight) and whether it is backlogged (has a waiting
request) before and after admission. Two clients are continuously backlogged over steps
[k1, k2] when both are backlogged at every sample from the start of k1 to the start of k2; queues
only shrink during admission, so two samples per step see every moment. The largest
|(W_f - W_g)(k1, k2)| over all such intervals and pairs is what Theorem 4.1 of 000 (DLPM), 5.1
(D²LPM) and 4.4 of 001 (VTC) bound.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

from sglang_fair.core.cost import CostModel

if TYPE_CHECKING:
    from sglang_fair.sim.cluster import Cluster


class BacklogRecorder:
    """Records service and backlog per client (``every_worker``: backlogged on each worker)."""

    def __init__(
        self, clients: list[str], cost: CostModel, every_worker: bool = False, perceived: bool = False
    ) -> None:
        self.clients = clients
        self.cost = cost
        self.every_worker = every_worker
        self.perceived = perceived  # measure w_e * input (VTC's cost) instead of w_e * extend
        self.service: list[dict[str, float]] = []  # at the start of each step
        self.backlog_start: list[frozenset[str]] = []
        self.backlog_after_admit: list[frozenset[str]] = []

    def _backlogged(self, cluster: Cluster) -> frozenset[str]:
        per_worker = [{r.client for r in w.waiting} for w in cluster.workers]
        if self.every_worker:
            return frozenset(set.intersection(*per_worker))
        return frozenset(set().union(*per_worker))

    def observe(self, phase: str, step: int, cluster: Cluster) -> None:
        if phase == "arrived":
            totals = {c: 0.0 for c in self.clients}
            for w in cluster.workers:
                for c, s in (w.perceived if self.perceived else w.service).items():
                    totals[c] = totals.get(c, 0.0) + s
            self.service.append({c: s / self.cost.weight(c) for c, s in totals.items()})
            self.backlog_start.append(self._backlogged(cluster))
        elif phase == "admitted":
            self.backlog_after_admit.append(self._backlogged(cluster))

    def max_diff(self) -> float:
        """Largest service difference of two clients over an interval both were backlogged."""
        return max((self.pair_max_diff(f, g) for f, g in combinations(self.clients, 2)), default=0.0)

    def pair_max_diff(self, f: str, g: str) -> float:
        best, lo, hi, in_run = 0.0, 0.0, 0.0, False
        for k, start in enumerate(self.backlog_start):
            if not (f in start and g in start):
                in_run = False
                continue
            diff = self.service[k].get(f, 0.0) - self.service[k].get(g, 0.0)
            if not in_run:
                lo = hi = diff
                in_run = True
            best = max(best, diff - lo, hi - diff)
            lo, hi = min(lo, diff), max(hi, diff)
            after = self.backlog_after_admit[k] if k < len(self.backlog_after_admit) else frozenset()
            if not (f in after and g in after):
                in_run = False
        return best
