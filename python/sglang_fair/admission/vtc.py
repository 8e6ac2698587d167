"""Virtual Token Counter: Algorithm 2 of 001 (Sheng et al., OSDI 24), weighted VTC of its §4.3.

Each client has a virtual counter c_i of the service it received, divided by its weight. Selection
repeatedly takes the client with the smallest counter among those with waiting requests, admits its
earliest request and charges the extend cost at once; it stops at the first selected request that
does not fit (Alg. 2, line 21), so a big request is not starved by smaller ones behind it. Output
tokens are charged as they are produced.

Counter lift (Alg. 2, lines 7-13), when a request arrives for a client with no waiting request:
    if other clients have waiting requests: c_u = max(c_u, min of their counters)
    else:                                   c_u = max(c_u, c_l), l = the client whose request left
                                            the waiting queue last
so that credit is never carried over from an idle period. Counters are never reset (001 §4.1).
Bound (001 Thm 4.4): two clients backlogged over [t1, t2] receive weighted service that differs by
at most 2 * max(w_e * L_input, w_q * M).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sglang_fair.admission.base import AdmissionConfig, AdmissionPolicy, Budget, R, WaitingRequest


class VTC(AdmissionPolicy):
    name = "vtc"

    def __init__(self, config: AdmissionConfig) -> None:
        super().__init__(config)
        self.counters: defaultdict[str, float] = defaultdict(float)
        self.last_left: str | None = None

    def counter(self, client: str) -> float | None:
        return self.counters[client]

    def on_arrival(self, req: WaitingRequest) -> None:
        if self.book.queued[req.client] == 0:
            self._lift(req.client)
        super().on_arrival(req)

    def _lift(self, client: str) -> None:
        others = [self.counters[c] for c, n in self.book.queued.items() if n > 0 and c != client]
        if others:
            floor = min(others)
        elif self.last_left is not None:
            floor = self.counters[self.last_left]
        else:
            return
        self.counters[client] = max(self.counters[client], floor)

    def on_drop(self, req: WaitingRequest) -> None:
        super().on_drop(req)
        self.last_left = req.client

    def _charge(self, client: str, amount: float) -> None:
        super()._charge(client, amount)
        self.counters[client] += amount / self.cost.weight(client)

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        per_client: dict[str, list[R]] = {}
        for req in sorted(waiting, key=lambda r: r.arrival, reverse=True):
            per_client.setdefault(req.client, []).append(req)  # each list: latest first
        admitted: list[R] = []
        while per_client and not budget.exhausted():
            client = min(per_client, key=lambda c: (self.counters[c], per_client[c][-1].arrival))
            req = per_client[client][-1]
            if not budget.try_add(req):
                break
            per_client[client].pop()
            if not per_client[client]:
                del per_client[client]
            self._charge(client, self._admit(req))
            self.last_left = client
            admitted.append(req)
        return admitted
