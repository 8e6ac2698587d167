"""Longest prefix match (SGLang's ``lpm``): the longest cached prefix first, ties in arrival order.

Unlike SGLang, which falls back to FCFS above 128 waiting requests, the order is kept exactly at any
queue length: one sort by the cached length the host supplies, or, for a host that keeps the queue
in that order under updates (:class:`LpmQueue`), no sort at all.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable, Iterable, Sequence
from typing import Generic

from sglang_fair.admission.base import AdmissionPolicy, Budget, R, WaitingRequest
from sglang_fair.admission.fcfs import admit_in_order


class LpmOrdered(list[R]):
    """A list its maker guarantees to be in LPM order (what :func:`lpm_order` would return)."""


def lpm_order(waiting: Sequence[R]) -> list[R]:
    """``waiting`` sorted by cached prefix length, longest first; stable, so ties keep arrival order."""
    if isinstance(waiting, LpmOrdered):
        return list(waiting)
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


class LpmQueue(Generic[R]):
    """Requests kept in LPM order under arrivals, departures and changes of ``cached_len``.

    Keys are (-cached_len, arrival, n), n the order of first insertion, so the order is exactly
    :func:`lpm_order`'s when arrivals are distinct. Each update costs O(log n) comparisons and
    one list move (in C); :meth:`ordered` hands the order to a policy without a sort.
    """

    def __init__(self) -> None:
        self._keys: list[tuple[int, float, int]] = []
        self._items: list[R] = []
        self._key_of: dict[Hashable, tuple[int, float, int]] = {}
        self._n = 0

    def __len__(self) -> int:
        return len(self._items)

    def push(self, req: R) -> None:
        old = self._key_of.get(req.rid)
        if old is not None:
            if old[0] == -req.cached_len:
                return
            self._take(old)
            seq = old[2]
        else:
            self._n += 1
            seq = self._n
        key = (-req.cached_len, req.arrival, seq)
        i = bisect_left(self._keys, key)
        self._keys.insert(i, key)
        self._items.insert(i, req)
        self._key_of[req.rid] = key

    def remove(self, rid: Hashable) -> None:
        key = self._key_of.pop(rid, None)
        if key is not None:
            self._take(key)

    def _take(self, key: tuple[int, float, int]) -> None:
        i = bisect_left(self._keys, key)
        del self._keys[i]
        del self._items[i]

    def rebuild(self, reqs: Iterable[R]) -> None:
        """Start over from ``reqs`` (after their cached lengths all changed)."""
        self._keys, self._items, self._key_of = [], [], {}
        for req in reqs:
            self.push(req)

    def ordered(self) -> LpmOrdered[R]:
        return LpmOrdered(self._items)
