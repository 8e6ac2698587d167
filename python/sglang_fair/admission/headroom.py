"""Headroom for an earlier priority band: running slots kept free for it while it is active.

Bands alone (``bands.py``) only order the waiting queue: an interactive request that reaches a worker
whose running batch is full of batch work still waits for one of those to finish. With
``band_reserve_s`` = W > 0, a band b that had a request waiting or running in the last W seconds of the
host's clock (``tick``) is *active* and holds a reserve

    R_b = min(ceil(peak_b x (1 + band_reserve_margin)), floor(band_reserve_share x C), C - 1)

where peak_b is the most requests band b had in flight (waiting or running) at any admission step of the
last W to 2W seconds, its own measured load (the margin leaves room for the next arrival past it), and C
the worker's running slots (the requests running now plus the budget's ``room()``). A request of band c
is admitted only while, after it, the step could still start min(sum over active b < c of
max(0, R_b - running_b), floor(band_reserve_share x C)) requests. Hence, while b is active:

- no admission takes the requests of bands after b past C - R_b running (requests admitted before the
  reserve rose finish as they would: nothing is preempted);
- a request of band b that arrives while band b's requests in flight, with it, are at most R_b and the
  later bands hold at most C - R_b slots is admitted at the next admission step, without waiting for a
  later band's request to finish (when the budget's other limits, KV memory and the step's prefill
  tokens, admit it: the reserve counts slots only). The first request of a band that was quiet finds
  no reserve: it waits for a free slot, as without one;
- when b has had nothing in flight for W seconds, R_b = 0 and the later bands get the whole worker,
  unless b is *standing*: a band that the configuration names for some client (``client_bands``, a
  tenant file) before the last band in use (the configuration's last or the default band 1). A
  standing band's peak_b is at least ``band_reserve_floor`` (1) even while quiet (so with the margin
  R_b is 2 by default, within the same bounds), and its first request after a quiet spell also
  starts at the next step: the later bands get all but those slots.

A request counts in its own band, aged or not: aging (``band_aging_s``) orders the scan, the reserve
bounds occupancy, so a saturating batch band whose requests have all aged does not take the reserve.
However many earlier bands are active, their reserves together keep at most floor(share x C) slots
idle while a later band waits, so the later band can always take the rest and cannot starve either. A
host that never ticks, or a budget that does not say its ``room()``, gets no reserve.

The same guard applies the prefill pace (``pace.py``, ``band_prefill_share``): while a band has a
request in flight, the later bands are admitted one request a step, and only once their earlier
prefills' time is paid back.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from sglang_fair.admission.base import Budget, R, WaitingRequest, room_of
from sglang_fair.admission.pace import PrefillPace

BandOf = Callable[[WaitingRequest], int]


@dataclass
class BandLoad:
    """One band's recent peak of requests in flight (over the last one to two windows) and when it last
    had any."""

    window: float
    start: float | None = None  # start of the current window
    peak: int = 0  # the largest count seen in the current window
    earlier: int = 0  # ... in the window before it (0 if that one is older than a window ago)
    seen: float = -math.inf  # the last time the band had a request in flight

    def _roll(self, now: float) -> None:
        if self.start is None or now - self.start >= self.window:
            recent = self.start is not None and now - self.start < 2 * self.window
            self.earlier, self.peak, self.start = self.peak if recent else 0, 0, now

    def see(self, now: float, inflight: int) -> None:
        self._roll(now)
        self.peak = max(self.peak, inflight)
        if inflight:
            self.seen = now

    def reserve(self, now: float) -> int:
        """The band's peak if it is active at ``now``, else 0."""
        self._roll(now)
        return max(self.peak, self.earlier) if now - self.seen <= self.window else 0


class Headroom:
    """The reserves of the bands, and how many requests of each band run (those admitted through
    :meth:`guard`)."""

    def __init__(self, window_s: float, share: float, margin: float = 0.0,
                 prefill_share: float = 1.0, floor: int = 0) -> None:
        self.window_s, self.share, self.margin = window_s, share, margin
        self.floor = floor
        self.standing: frozenset[int] = frozenset()  # the bands that keep ``floor`` slots while quiet
        self.pace = PrefillPace(prefill_share)
        self.loads: dict[int, BandLoad] = {}
        self.band_of_running: dict[Hashable, int] = {}
        self.running: Counter[int] = Counter()
        self.refused = 0  # admission steps at which the reserve kept a band out, for inspection

    @property
    def enabled(self) -> bool:
        return self.window_s > 0

    def tick(self, now: float) -> None:
        self.pace.tick(now)

    def load(self, band: int) -> BandLoad:
        load = self.loads.get(band)
        if load is None:
            load = self.loads[band] = BandLoad(self.window_s)
        return load

    def guard(self, budget: Budget, waiting: Sequence[R], bands: Sequence[int], band_of: BandOf,
              now: float, running: int) -> tuple[Budget, list[R], list[int]]:
        """``budget`` with the reserves and the prefill pace of this step (``running``: requests
        running on the worker now; ``bands``: each waiting request's own band), after counting each
        band's requests in flight, and the ``waiting`` requests (with their bands) it may admit: not
        those of a band whose every slot left is held, nor those the pace holds back (what is left
        over the held slots only shrinks within a step, so they would be refused, and a client with
        credit and nothing admissible would hold back its band's refills). Without the budget's
        ``room()`` there is no slot reserve, only the pace."""
        inflight = Counter(bands)
        inflight.update(self.running)
        first = min((b for b, n in inflight.items() if n > 0), default=None)
        room = room_of(budget)
        free = room() if room is not None else None
        reserves: dict[int, int] = {}
        most = 0
        if free is not None:
            for band in set(inflight) | set(self.loads) | self.standing:
                self.load(band).see(now, inflight[band])
            capacity = running + free
            most = min(math.floor(self.share * capacity), capacity - 1)
            wants = {b: min(self.want(b, load, now), most) for b, load in sorted(self.loads.items())}
            reserves = {b: r for b, r in wants.items() if r > 0}
        guarded = Reserved(budget, room or (lambda: None), self, reserves, band_of, most, now, first)
        shut = {b for b in inflight if reserves and self.held(b, reserves, most) >= (free or 0)}
        if shut:
            self.refused += 1
        if first is not None and not self.pace.open():
            self.pace.paced += 1
            shut.add(first + 1)
        if shut:
            guarded.shut = min(shut)
            kept = [(r, b) for r, b in zip(waiting, bands, strict=True) if b < guarded.shut]
            return guarded, [r for r, _ in kept], [b for _, b in kept]
        return guarded, list(waiting), list(bands)

    def want(self, band: int, load: BandLoad, now: float) -> int:
        """A band's reserve before the worker's bounds: its recent peak (at least the floor for a
        standing band) and the margin, rounded up."""
        peak = load.reserve(now)
        if band in self.standing:
            peak = max(peak, self.floor)
        return math.ceil(peak * (1.0 + self.margin) - 1e-9)

    def held(self, band: int, reserves: dict[int, int], most: int) -> int:
        """Slots held for the bands before ``band``: what their reserves have not yet filled, at most
        ``most`` in all (several earlier bands hold no more than one could)."""
        return min(sum(max(0, r - self.running[b]) for b, r in reserves.items() if b < band), most)

    def admitted(self, rid: Hashable, band: int) -> None:
        self.band_of_running[rid] = band
        self.running[band] += 1

    def stopped(self, rid: Hashable, now: float | None) -> None:
        """``rid`` left the running batch (finished, aborted or retracted)."""
        band = self.band_of_running.pop(rid, None)
        if band is None:
            return
        self.running[band] -= 1
        if now is not None:
            self.load(band).seen = now


class Reserved:
    """A budget that refuses a request when it would take a slot held for an earlier band, or when
    the prefill pace holds the later bands back."""

    def __init__(self, budget: Budget, room: Callable[[], int | None], headroom: Headroom,
                 reserves: dict[int, int], band_of: BandOf, most: int, now: float,
                 first: int | None) -> None:
        self.budget, self.room, self.headroom = budget, room, headroom
        self.reserves, self.band_of, self.most = reserves, band_of, most
        self.now, self.first = now, first  # the earliest band in flight (None: none)
        self.shut = math.inf  # this band and the later ones have no slot left that is not held

    def try_add(self, req: WaitingRequest) -> bool:
        band = self.band_of(req)
        if band >= self.shut:
            return False
        held = self.headroom.held(band, self.reserves, self.most) if self.reserves else 0
        if held and (self.room() or 0) <= held:
            self.headroom.refused += 1
            self.shut = band  # held(band) only grows with the band and what is left only shrinks
            return False
        if not self.budget.try_add(req):
            return False
        self.headroom.admitted(req.rid, band)
        pace = self.headroom.pace
        if pace.enabled:
            later = self.first is not None and band > self.first
            pace.admitted(self.now, max(0, req.input_len - req.cached_len), later)
            if later and self.first is not None:  # one later-band request a step (pace.py)
                self.shut = min(self.shut, self.first + 1)
        return True

    def exhausted(self) -> bool:
        return self.budget.exhausted()
