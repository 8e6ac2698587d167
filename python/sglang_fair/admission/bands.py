"""Priority bands for the deficit policies (``dlpm``, ``dlpm_light``): strict priority between bands,
the policy's own fairness inside each, and an aging guard so that no band starves.

A client's band comes from ``AdmissionConfig.client_bands`` (a tenant file's ``band``: interactive 0,
standard 1, batch 2; a client without one is in band 1), or, for a tenant that allows it, from the
request's own SGLang ``priority`` (``band_names.request_band``, carried as ``req.band``). Each
admission step scans band 0's waiting requests first, with the policy's credit check and refills over
that band's clients only, then band 1's with what the budget has left, and so on: a later band is
admitted only when the earlier ones have nothing more that fits, and two clients of one band keep the
policy's bound between them (their refills are the policy's, unchanged; the other bands only take
budget, as memory pressure does).

Aging: a request of a later band that has waited ``aging_s`` seconds of the host's clock (``tick``) is
scanned with band 0 from then on, by the policy's own fairness among band 0's clients (so a flooding
later band cannot take band 0's place: it gets a fair share of band 0's refills, no more). Under a band 0
that saturates the worker, a later band's request therefore waits ``aging_s``, then until band 0's
refills have paid its client's debt (at most U: ceil(U / Q^u) + 1 refills), then for a free slot. A
host that never ticks gets no aging (strict priority).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence

from sglang_fair.admission.band_names import DEFAULT_BAND
from sglang_fair.admission.base import R, WaitingRequest


class BandClock:
    """Each client's band, and since when each waiting request waits (stamped at its first scan)."""

    def __init__(self, client_bands: Mapping[str, float], aging_s: float) -> None:
        self.client_bands, self.aging_s = {c: int(b) for c, b in client_bands.items()}, aging_s
        self.since: dict[Hashable, float] = {}
        self.per_request = False  # some requests carry their own band (``req.band``, not None)
        self._standing: tuple[dict[str, int], frozenset[int]] | None = None  # for client_bands, as it was

    @property
    def enabled(self) -> bool:
        return bool(self.client_bands) or self.per_request

    def band_of(self, req: WaitingRequest) -> int:
        """A request's own band (``req.band``: its SGLang priority, where its tenant allows it), else
        its client's."""
        own = getattr(req, "band", None)
        return own if isinstance(own, int) else self.band(req.client)

    def standing(self) -> frozenset[int]:
        """The bands the configuration names before the last band in use (its last, or the default
        band for the clients it does not name): those that keep a floor of reserve (``headroom.py``)."""
        if self._standing is None or self._standing[0] is not self.client_bands:
            named = set(self.client_bands.values())
            last = max(named | {DEFAULT_BAND})
            self._standing = (self.client_bands, frozenset(b for b in named if b < last))
        return self._standing[1]

    def band(self, client: str) -> int:
        return self.client_bands.get(client, DEFAULT_BAND)

    def split(self, queue: Sequence[R], now: float | None,
              own: Sequence[int] | None = None) -> list[tuple[int, list[R]]]:
        """``queue`` cut into bands, each in its own order, band 0 first; a request that waited
        ``aging_s`` (by ``now``; None: no aging) is in band 0. ``own``: the requests' own bands, if
        known (``band_of``)."""
        groups: defaultdict[int, list[R]] = defaultdict(list)
        for req, band in zip(queue, own if own is not None else map(self.band_of, queue), strict=True):
            if band and now is not None and now - self.since.setdefault(req.rid, now) >= self.aging_s:
                band = 0
            groups[band].append(req)
        return sorted(groups.items())

    def stamp(self, queue: Iterable[WaitingRequest], now: float) -> None:
        """The requests of ``queue`` wait from ``now`` on if they were not seen before (as :meth:`split`
        stamps them), for requests left out of a step's scan."""
        for req in queue:
            self.since.setdefault(req.rid, now)

    def scope(self, band: int, members: Sequence[R], known: Iterable[str]) -> set[str]:
        """The clients one band's scan refills: every known client of ``band`` and the ``members``'."""
        return {c for c in known if self.band(c) == band} | {r.client for r in members}

    def left(self, reqs: Iterable[WaitingRequest]) -> None:
        """``reqs`` no longer wait (admitted or dropped)."""
        for req in reqs:
            self.since.pop(req.rid, None)
