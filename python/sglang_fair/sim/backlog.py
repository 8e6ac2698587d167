"""The fairness property of the papers, measured: service differences over backlogged intervals.

A :class:`BacklogRecorder` samples, at every step, each client's service so far (the cost of the
work the workers did for it, divided by its weight) and whether it is backlogged (has a waiting
request) before and after admission. Two clients are continuously backlogged over steps
[k1, k2] when both are backlogged at every sample from the start of k1 to the start of k2; queues
only shrink during admission, so two samples per step see every moment. The largest
|(W_f - W_g)(k1, k2)| over all such intervals and pairs is what Theorem 4.1 of [1] (DLPM), 5.1
(D²LPM) and 4.4 of [2] (VTC) bound.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

from sglang_fair.core.cost import CostModel
from sglang_fair.metrics.stats import max_drift

if TYPE_CHECKING:
    from sglang_fair.sim.lockstep import Lockstep


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

    def _backlogged(self, cluster: Lockstep) -> frozenset[str]:
        per_worker = [{r.client for r in w.waiting} for w in cluster.workers]
        if self.every_worker:
            return frozenset(set.intersection(*per_worker))
        return frozenset(set().union(*per_worker))

    def observe(self, phase: str, step: int, cluster: Lockstep) -> None:
        if phase == "arrived":
            kind = "perceived" if self.perceived else "actual"
            ledger = cluster.ledger
            self.service.append({c: ledger.total(c, kind) / self.cost.weight(c) for c in self.clients})
            self.backlog_start.append(self._backlogged(cluster))
        elif phase == "admitted":
            self.backlog_after_admit.append(self._backlogged(cluster))

    def max_diff(self) -> float:
        """Largest service difference of two clients over an interval both were backlogged."""
        return max((self.pair_max_diff(f, g) for f, g in combinations(self.clients, 2)), default=0.0)

    def pair_max_diff(self, f: str, g: str) -> float:
        """Largest |(W_f - W_g)(k1, k2)| over steps k1..k2 in which both were backlogged."""
        return max_drift((both, grow_f - grow_g) for both, grow_f, grow_g in self._pair_steps(f, g))

    def pair_max_stretch_service(self, f: str, g: str) -> float:
        """Largest W_f + W_g over one maximal stretch of steps in which both were backlogged.

        The difference over a stretch can never exceed this, so a bound at or above it is met
        trivially: a bound check is only exposed where this figure exceeds the bound.
        """
        best = total = 0.0
        for both, grow_f, grow_g in self._pair_steps(f, g):
            total = total + grow_f + grow_g if both else 0.0
            best = max(best, total)
        return best

    def _pair_steps(self, f: str, g: str) -> list[tuple[bool, float, float]]:
        """Per step k: (both backlogged over k..k+1, growth of W_f, growth of W_g). Step k counts as
        backlogged when both clients were at the start of k, after its admission, and at the start
        of k + 1."""
        starts, after, service = self.backlog_start, self.backlog_after_admit, self.service
        steps = []
        for k in range(len(starts) - 1):
            both = {f, g} <= starts[k] and {f, g} <= after[k] and {f, g} <= starts[k + 1]
            grow_f = service[k + 1].get(f, 0.0) - service[k].get(f, 0.0)
            grow_g = service[k + 1].get(g, 0.0) - service[k].get(g, 0.0)
            steps.append((both, grow_f, grow_g))
        return steps
