"""Deficit Longest Prefix Match: Algorithm 1 of [1] (Cao et al.), weighted by per-client weights.

State: the active client list l (clients with a waiting or running request) and a deficit counter
q_i per client. A client that joins l, new or back after having nothing waiting or running, starts
at q_i = 0 (line 12). Each step scans the waiting queue in LPM order (line 16); a request is admitted
only if its client's counter is positive and it fits (line 21), and admission charges w_e times its
extend length (line 23). Every output token charges w_q (line 26). When the scan meets a client with
q_i <= 0, CHECKREFILL runs (line 20): if no client with a waiting request has a positive counter,
every active client with q_i <= 0 gains Q^u times its weight (lines 3-8). Scans repeat until one
admits nothing and refills nothing (the ``while not Queue.empty()`` of line 17, made to terminate).

Bound ([1] Thm 4.1): clients continuously backlogged over [t1, t2] receive service (per unit of
weight) within 2 * (U + Q^u) of each other, U = w_e * L_input + w_q * M.

Work conservation: a request that fits is skipped only while some other client with a waiting
request still has a positive counter; that client's requests are admitted first once they fit.

Priority bands (``client_bands``, ``bands.py``): with bands configured, each step scans the bands in
order, band 0 first, and runs the loop above inside each band alone (its credit check and refills over
that band's clients), so fairness and its bound hold inside a band and a later band gets only what the
earlier ones leave; a request waiting ``band_aging_s`` is scanned with band 0. An active earlier band
keeps running slots free for its recent peak (``band_reserve_s``, ``headroom.py``), and the later bands'
prefills to a share of the worker's time while it has a request in flight (``band_prefill_share``,
``pace.py``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sglang_fair.admission.bands import BandClock
from sglang_fair.admission.base import AdmissionConfig, AdmissionPolicy, Budget, R, WaitingRequest
from sglang_fair.admission.headroom import Headroom
from sglang_fair.admission.lpm import lpm_order

Scope = set[str] | None  # the clients one scan is over (None: every client)


class DLPM(AdmissionPolicy):
    name = "dlpm"
    orders_by_cache = True
    uses_quantum = True
    supports_bands = True

    def __init__(self, config: AdmissionConfig) -> None:
        super().__init__(config)
        self.deficits: defaultdict[str, float] = defaultdict(float)
        self.refills = 0  # number of CHECKREFILL rounds that refilled, for inspection
        self.largest_quantum = 0.0  # the largest Q^u a refill gave (before weights): the bound's Q^u
        self.bands = BandClock(config.client_bands, config.band_aging_s)
        self.headroom = Headroom(config.band_reserve_s, config.band_reserve_share, config.band_reserve_margin,
                                 config.band_prefill_share, config.band_reserve_floor)

    def counter(self, client: str) -> float | None:
        return self.deficits[client]

    def on_arrival(self, req: WaitingRequest) -> None:
        if not self.book.active(req.client):
            self._join(req.client)
        super().on_arrival(req)

    def forget(self, client: str) -> bool:
        if not super().forget(client):
            return False
        self.deficits.pop(client, None)
        return True

    def _join(self, client: str) -> None:
        """Line 12: a client that joins l (new, or back with nothing waiting or running) starts at 0."""
        self.deficits[client] = 0.0

    def _charge(self, client: str, amount: float) -> None:
        super()._charge(client, amount)
        self.deficits[client] -= amount

    def _queued_client_has_credit(self, scope: Scope = None) -> bool:
        return any(n > 0 and self.deficits[c] > 0 for c, n in self.book.queued.items()
                   if scope is None or c in scope)

    def _refill(self, scope: Scope = None) -> None:
        """Lines 6-7: every active client (of ``scope``) with q_i <= 0 gains Q^u times its weight."""
        book, quantum = self.book, self.quantum
        for client in [c for c in set(book.queued) | set(book.running)
                       if book.active(c) and (scope is None or c in scope)]:
            if self.deficits[client] <= 0:
                self.deficits[client] += quantum * self.cost.weight(client)
        self._refilled(quantum)

    def _refill_waits(self, scope: Scope) -> bool:
        """Hook: should a due refill wait (no admission without credit this step)? Never, in Alg. 1."""
        return False

    def _refilled(self, quantum: float) -> None:
        self._quantum.note_round()
        self.refills += 1
        self.largest_quantum = max(self.largest_quantum, quantum)

    def tick(self, now: float) -> None:
        super().tick(now)
        if self.headroom.enabled:
            self.headroom.tick(now)

    def order(self, waiting: Sequence[R]) -> list[R]:
        """Line 16, SORTBYPREFIX: the scan order of one step (a variant may reorder clients)."""
        return lpm_order(waiting)

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        queue = self.order(waiting)
        if not self.bands.enabled:
            return self._scan(queue, budget, None)
        admitted: list[R] = []
        own = None
        if self.headroom.enabled and self.now is not None:
            band_of = self.bands.band_of
            self.headroom.standing = self.bands.standing()
            budget, kept, own = self.headroom.guard(budget, queue, list(map(band_of, queue)), band_of,
                                                    self.now, sum(self.book.running.values()))
            if len(kept) < len(queue):  # a band kept out this step still ages
                self.bands.stamp(queue, self.now)
            queue = kept
        for band, members in self.bands.split(queue, self.now, own):
            if budget.exhausted():
                break
            admitted += self._scan(members, budget, self.bands.scope(band, members, self.deficits))
        self.bands.left(admitted)
        return admitted

    def on_drop(self, req: WaitingRequest) -> None:
        super().on_drop(req)
        self.bands.left([req])

    def on_finish(self, req: WaitingRequest) -> None:
        super().on_finish(req)
        self.headroom.stopped(req.rid, self.now)

    def on_retract(self, req: WaitingRequest) -> None:
        super().on_retract(req)
        self.headroom.stopped(req.rid, self.now)

    def _scan(self, queue: list[R], budget: Budget, scope: Scope) -> list[R]:
        """Lines 16-26 over ``queue``, CHECKREFILL over the clients of ``scope``."""
        admitted: list[R] = []
        progress = True
        credit: bool | None = None  # cached CHECKREFILL condition; None = recompute
        while queue and progress and not budget.exhausted():
            progress = False
            remaining: list[R] = []
            deficits = self.deficits
            for i, req in enumerate(queue):
                client = req.client
                if credit and deficits[client] <= 0:  # skipped, and no refill: a queued client has credit
                    remaining.append(req)
                    continue
                if budget.exhausted():
                    remaining.extend(queue[i:])
                    break
                if self.deficits[client] <= 0:  # line 20: CHECKREFILL
                    if credit is None:
                        credit = self._queued_client_has_credit(scope)
                    if not credit:
                        if self._refill_waits(scope):  # dlpm_light: a client's next request is near
                            remaining.extend(queue[i:])
                            break
                        self._refill(scope)
                        credit, progress = None, True
                if self.deficits[client] > 0 and budget.try_add(req):
                    self._charge(client, self._admit(req))
                    admitted.append(req)
                    credit, progress = None, True
                else:
                    remaining.append(req)
            queue = remaining
        return admitted
