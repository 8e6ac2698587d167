"""A worker's quantum Q^u: a fixed number of service units, or R seconds of the worker's measured service.

A quantum in tokens means different things on different machines: 65,536 tokens is about one second of
an A100's service at 256 running requests and two minutes of a CPU worker's at 8. A quantum in seconds
travels: a round of refills is about ``seconds`` of what this worker serves, on any hardware and at any
batch size. :class:`ServiceMeter` measures that service (the policy's own cost units per second of busy
time) from the times its host passes in (:meth:`AdmissionPolicy.tick`); :class:`Quantum` turns it into
Q^u, never below the largest request admitted in the last few rounds (one request's cost), before the
weight. That memory fades per round of refills, not per admission: a client whose requests are the
largest (a long document next to short chats) sends one every round or so, and a memory that faded with
every smaller request admitted in between left Q^u below its request at its next refill, so it waited
two rounds for one (a backlogged client served nothing for 20 s in the frontier's QA S2 cell).

The meter is a bias-corrected exponential average over ``tau`` seconds of samples of at least
``sample`` busy seconds each (admission charges a request's prefill when it is admitted, so a shorter
sample would see bursts): its first sample counts in full, so the quantum is right after the first busy
second, and intervals in which the worker had nothing to do are left out (an idle worker's rate would
say nothing of a round's length when it is busy).
"""

from __future__ import annotations

import math

ROUND_DECAY = 0.9  # the remembered largest request shrinks by this per round of refills
METER_TAU_S = 10.0  # seconds over which the service rate is averaged
METER_SAMPLE_S = 1.0  # busy seconds per sample: admission charges a request's whole prefill at once


class ServiceMeter:
    """Service units per second while the worker is busy. Time is passed in (any origin)."""

    def __init__(self, tau: float = METER_TAU_S, sample: float = METER_SAMPLE_S) -> None:
        self.tau, self.sample = tau, sample
        self._last: tuple[float, float, bool] | None = None  # (time, service so far, busy then)
        self._busy_s = 0.0  # busy seconds of the sample being gathered
        self._busy_served = 0.0  # service in them
        self._num = 0.0
        self._den = 0.0

    @property
    def rate(self) -> float:
        """Service units per busy second (0 before the first busy interval)."""
        return self._num / self._den if self._den else 0.0

    def tick(self, now: float, served: float, busy: bool) -> None:
        """At ``now`` the worker has served ``served`` units in all and is ``busy`` (has a client
        with a request waiting or running); the interval since the last tick counts if it began busy."""
        last = self._last
        self._last = (now, served, busy)
        if last is None:
            return
        t0, s0, was_busy = last
        dt = now - t0
        if dt <= 0:
            self._last = last  # a clock that did not move: keep measuring from the earlier tick
            return
        if not was_busy:
            return
        self._busy_s += dt
        self._busy_served += served - s0
        if self._busy_s < self.sample:
            return
        a = 1.0 - math.exp(-self._busy_s / self.tau)
        self._num += a * (self._busy_served / self._busy_s - self._num)
        self._den += a * (1.0 - self._den)
        self._busy_s = self._busy_served = 0.0


class Quantum:
    """Q^u before the client's weight: ``tokens`` if set, else ``seconds`` x the measured rate, never
    below the largest recent admission cost."""

    def __init__(self, tokens: float, seconds: float) -> None:
        self.tokens, self.seconds = tokens, seconds
        self.meter = ServiceMeter()
        self.largest = 0.0  # the recent largest admission cost

    @property
    def timed(self) -> bool:
        return not self.tokens

    def value(self) -> float:
        if self.tokens:
            return self.tokens
        return max(self.seconds * self.meter.rate, self.largest, 1.0)

    def note_admission(self, cost: float) -> None:
        self.largest = max(cost, self.largest)

    def note_round(self) -> None:
        """A round of refills ended: an old large request counts a little less."""
        self.largest *= ROUND_DECAY
