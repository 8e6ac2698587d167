"""Virtual Token Counter: Algorithm 2 of [2] (Sheng et al., OSDI 24), weighted VTC of its §4.3.

Each client has a virtual counter c_i of the service it received, divided by its weight; service is
[2]'s cost, w_e * input tokens + w_q * output tokens (all input tokens: VTC ignores the prefix
cache, which is what makes it scatter shared prefixes). Selection
repeatedly takes the client with the smallest counter among those with waiting requests, admits its
earliest request and charges the extend cost at once; it stops at the first selected request that
does not fit (Alg. 2, line 21), so a big request is not starved by smaller ones behind it. Output
tokens are charged as they are produced.

Counter lift (Alg. 2, lines 7-13), when a request arrives for a client with no waiting request:
    if other clients have waiting requests: c_u = max(c_u, min of their counters)
    else:                                   c_u = max(c_u, c_l), l = the client whose request left
                                            the waiting queue last
so that credit is never carried over from an idle period. Counters are never reset ([2] §4.1).
Bound ([2] Thm 4.4): two clients backlogged over [t1, t2] receive weighted service that differs by
at most 2 * max(w_e * L_input, w_q * M).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence

from sglang_fair.admission.base import (
    AdmissionConfig,
    AdmissionPolicy,
    Budget,
    R,
    WaitingRequest,
    extend_len,
)


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

    def forget(self, client: str) -> bool:
        """The client whose counter is the lift's floor (``last_left``) is kept."""
        if client == self.last_left or not super().forget(client):
            return False
        self.counters.pop(client, None)
        return True

    def _lift(self, client: str) -> None:
        others = [self.counters[c] for c, n in self.book.queued.items() if n > 0 and c != client]
        if others:
            floor = min(others)
        elif self.last_left is not None:
            floor = self.counters[self.last_left]
        else:
            return
        self.counters[client] = max(self.counters[client], floor)

    def admission_cost(self, req: WaitingRequest) -> float:
        """[2] counts every input token: VTC does not know about the prefix cache."""
        extend_len(req)  # validates the lengths
        return self.cost.extend_cost(req.input_len)

    def _requeue(self, req: WaitingRequest) -> None:
        if self.book.queued[req.client] == 0:
            self._lift(req.client)

    def on_drop(self, req: WaitingRequest) -> None:
        super().on_drop(req)
        self.last_left = req.client

    def _charge(self, client: str, amount: float) -> None:
        super()._charge(client, amount)
        self.counters[client] += amount / self.cost.weight(client)

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        order = sorted(waiting, key=lambda r: r.arrival)
        heads: dict[str, deque[int]] = {}  # per client: positions in ``order``, earliest first
        for i, req in enumerate(order):
            heads.setdefault(req.client, deque()).append(i)
        admitted: list[R] = []
        while heads and not budget.exhausted():
            client = min(heads, key=lambda c: (self.counters[c], heads[c][0]))
            req = order[heads[client][0]]
            if not budget.try_add(req):  # Alg. 2 line 21: stop at the first misfit
                break
            heads[client].popleft()
            if not heads[client]:
                del heads[client]
            self._charge(client, self._admit(req))
            self.last_left = client
            admitted.append(req)
        return admitted
