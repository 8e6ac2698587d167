"""DLPM for light clients (``dlpm_light``): Algorithm 1 of [1] with four changes, Thm 4.1 kept.

Under DLPM as written, a client that returns to an empty queue restarts at q_i = 0 (line 12) and
waits until every client with credit has spent it; and since the scan is in LPM order, a flooding
client whose prefix is cached is scanned before a light client's uncached request even when both
have credit. A light client that sends one short request at a time therefore waits up to a whole
quantum of the flooder's service per request: the larger Q^u, the longer.

1. **Every client stays in l, and a refill tops up.** A client that leaves keeps its counter, and
   refills (line 7) reach it while it is away. At a refill every client with q_i <= 0 gains
   Q^u w_i, as in Algorithm 1, and a client with credit left, which can only be one with nothing
   waiting, is topped up to Q^u w_i (Algorithm 1 leaves it as it is, so a client that uses less
   than its share slowly runs dry and then waits a whole round). A client seen for the first time
   after the first refill starts at Q^u w_i, the counter it would have had if it had been idle in l
   from the start. No client gains more than Q^u w_i per refill, and leaving and returning neither
   forgives a debt (line 12 does: q_i < 0 becomes 0) nor earns credit.
2. **Light clients first.** Among the waiting requests, those of clients with fewer than half the
   average number of requests in flight (waiting or running, over the active clients) are scanned
   first, in LPM order, then the rest in LPM order. Clients of comparable load are ordered by LPM
   alone, as in DLPM, so a light client's few requests jump the queue and nothing else changes.
   The credit check of line 21 and the refill condition are unchanged: a client is admitted only
   with q_i > 0.
3. **A returning client is waited for, briefly.** A client that keeps requests in flight has nothing
   waiting here between one request's finish and its next arrival; a refill in that gap gives every
   other client a quantum and the freed slots (a 4:1 pair split 2.5:1 live). So a due refill waits
   while a client with credit, requests running here and nothing waiting has a finish here that no
   arrival has answered yet, within twice its measured return time (``returns.py``): at most the
   quantum's seconds per round of refills, its waits added up (a budget counted from the round's first
   wait was spent by one early wait, and the next gap refilled at once), never while a light client
   (change 2) waits (nor for one: a client of one request at a time has none running between them).

4. **A slot kept for a light client's return.** Scanned first, a light client's request still waits for
   a running request to finish when every slot is taken: on a worker of 8 running requests that is most
   of a light request's latency. A light client that sends its next request once one is answered (a chat,
   an agent's loop) is back within its measured return time (change 3's ``returns.py``; the default
   router sends a client of one request at a time back to the worker of its last request), so while the
   return of a client that was light at its finish is due, other clients' requests leave it a slot, at
   most a quarter of the worker's slots (``light_reserve.py``). The slot serves a client below its share,
   and it is kept only for the return's wait: a light client that sends now and then keeps none.

Its quantum is time by default: Q^u = 0.25 s of the worker's measured service, never below the
largest request of the last few rounds (admission/quantum.py), so a round means the same on an H100 at
256 running requests and on a CPU at 8, and a client whose requests are the largest is served every round.

Bound: the proof of [1] Thm 4.1 needs -U < q_i <= Q^u w_i, and that a client with a waiting
request gains exactly Q^u w_i at each refill, which holds because refills happen only when no
client with a waiting request has credit; the scan order plays no part in it. A quantum that
changes between refills gives every client the same Q^u at each one, so the proof goes through with
Q^u its largest value in [t1, t2] (``largest_quantum``): two clients backlogged over [t1, t2] still
receive service (per unit of weight) within 2 (U + Q^u_max) of each other; in time, 2 U / r + 0.5 s
of the worker's service at rate r (the quantum's floor aside). Change 3 only delays refills, so the
bound stands; change 4 only refuses admissions (a refusal is not a refill), so it stands too. What they
cost is work conservation: change 4 a slot per returning light client for its return's wait (at most
twice its return time, and the quantum's seconds); change 3 a request that fits may wait for a refill,
at most ``default_quantum_s`` (or ``--fair-quantum-s``) per round. Locality: every client's own requests keep
their LPM order.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.admission.base import AdmissionConfig, Budget, R, WaitingRequest, room_of
from sglang_fair.admission.dlpm import DLPM, Scope
from sglang_fair.admission.light_reserve import ReservedBudget, slots_to_keep
from sglang_fair.admission.lpm import lpm_order
from sglang_fair.admission.returns import Returns


class DLPMLight(DLPM):
    name = "dlpm_light"
    # Its quantum is time: a round of refills is about a quarter of a second of this worker's measured service
    # (admission/quantum.py), whatever the hardware and batch size, so weights hold within seconds and a
    # refill is still many requests long where the worker is fast. dlpm keeps the paper's 4,096 units.
    default_quantum_s = 0.25

    def __init__(self, config: AdmissionConfig) -> None:
        super().__init__(config)
        self.returns = Returns(longest=config.quantum_s or self.default_quantum_s)
        self.waits = 0  # refills that waited for a returning client, for inspection
        self.waited = 0.0  # seconds this round's due refills have waited, for inspection
        self._waiting_since: float | None = None  # when the wait going on began to be counted
        self.light_at_finish: set[str] = set()  # light when their last request here finished

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        """Change 4: while a light client's return is due, other clients leave it a slot."""
        room = room_of(budget)
        if self.now is None or room is None or not self.light_at_finish:
            return super().select(waiting, budget)
        left = room()
        if not left:
            return super().select(waiting, budget)
        now = self.now
        due = sum(self.returns.due(now, c) for c in self.light_at_finish)
        keep = slots_to_keep(due, sum(self.book.running.values()), left)
        if keep:
            light = self.light_clients() | self.light_at_finish
            budget = ReservedBudget(budget, room, keep, light.__contains__)
        return super().select(waiting, budget)

    def on_arrival(self, req: WaitingRequest) -> None:
        super().on_arrival(req)
        if self.now is not None:
            self.returns.arrived(req.client, self.now)

    def on_finish(self, req: WaitingRequest) -> None:
        light = req.client in self.light_clients()  # counted with this request in flight
        super().on_finish(req)
        if self.now is not None:
            self.returns.finished(req.client, self.now)
        (self.light_at_finish.add if light else self.light_at_finish.discard)(req.client)

    def forget(self, client: str) -> bool:
        if not super().forget(client):
            return False
        self.returns.forget(client)
        self.light_at_finish.discard(client)
        return True

    def _refill_waits(self, scope: Scope) -> bool:
        """Change 3: wait while a client with credit, requests running and nothing waiting is about to
        return (never on a worker that runs nothing: no next step would come to end the wait), at most
        the quantum's seconds in all per round: a wait lasts from the check that began it to the
        admission or refill that ends it, and a round's waits add up."""
        book = self.book
        if self.now is None or not any(book.running.values()):
            return False
        if any(book.queued[c] for c in self.light_clients()):
            return False  # change 2: a light client's request is not held back for a heavy one
        if self._waiting_since is not None:
            self.waited += self.now - self._waiting_since
        if self.waited >= self.returns.longest:
            self._waiting_since = None
            return False  # this round has waited its most
        deficits = self.deficits
        waits = self.returns.awaited(self.now, (
            c for c in self.returns.unanswered
            if deficits[c] > 0 and book.running[c] and not book.queued[c] and (scope is None or c in scope)))
        self.waits += waits
        self._waiting_since = self.now if waits else None
        return waits

    def _admit(self, req: WaitingRequest) -> float:
        self._end_wait()
        return super()._admit(req)

    def _end_wait(self) -> None:
        """An admission ends the wait going on (change 3); its time joins the round's."""
        if self._waiting_since is not None and self.now is not None:
            self.waited += self.now - self._waiting_since
            self._waiting_since = None

    def _refilled(self, quantum: float) -> None:
        super()._refilled(quantum)
        self.waited, self._waiting_since = 0.0, None

    def _join(self, client: str) -> None:
        """Instead of line 12: a returning client keeps its counter; a new one gets what it would
        have had if it had been idle in l from the start."""
        if client not in self.deficits:
            fresh = self.quantum * self.cost.weight(client) if self.refills else 0.0
            self.deficits[client] = fresh

    def _refill(self, scope: set[str] | None = None) -> None:
        """Line 7 over every client seen (of ``scope``, a band's): q_i <= 0 gains Q^u w_i (as in
        Algorithm 1); a client with credit left (none waiting, else there would be no refill) is topped
        up to Q^u w_i."""
        quantum = self.quantum
        for client, q in self.deficits.items():
            if scope is not None and client not in scope:
                continue
            full = quantum * self.cost.weight(client)
            self.deficits[client] = min(q + full, full)
        self._refilled(quantum)

    def order(self, waiting: Sequence[R]) -> list[R]:
        """LPM order, with the requests of light clients (see :meth:`light_clients`) first."""
        ordered = lpm_order(waiting)
        light = self.light_clients()
        if not light:
            return ordered
        first = [r for r in ordered if r.client in light]
        if len(first) == len(ordered):
            return ordered
        return first + [r for r in ordered if r.client not in light]

    def light_clients(self) -> set[str]:
        """Active clients with fewer than half the average number of requests in flight (waiting or
        running): a client that sends one request at a time next to a flood of them."""
        book = self.book
        inflight = {c: book.queued[c] + book.running[c] for c in set(book.queued) | set(book.running)}
        inflight = {c: n for c, n in inflight.items() if n > 0}
        total = sum(inflight.values())
        return {c for c, n in inflight.items() if 2 * n * len(inflight) < total}
