"""Longest prefix match (SGLang's ``lpm``): the longest cached prefix first, ties in arrival order.

Unlike SGLang, which falls back to FCFS above 128 waiting requests, the order is kept exactly at any
queue length: one sort by the cached length the host supplies.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.admission.base import AdmissionPolicy, Budget, R, WaitingRequest
from sglang_fair.admission.fcfs import admit_in_order


def lpm_order(waiting: Sequence[R]) -> list[R]:
    """``waiting`` sorted by cached prefix length, longest first; stable, so ties keep arrival order."""
    by_arrival = sorted(waiting, key=_arrival)
    return sorted(by_arrival, key=_neg_cached)


def _arrival(req: WaitingRequest) -> float:
    return req.arrival


def _neg_cached(req: WaitingRequest) -> int:
    return -req.cached_len


class LPM(AdmissionPolicy):
    name = "lpm"
    orders_by_cache = True

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        return admit_in_order(self, lpm_order(waiting), budget)
