"""Prefill pacing for an earlier priority band: later bands' prefills take at most a share of the time.

A slot reserve (``headroom.py``) lets an interactive request start at once, but not run at its own
speed: SGLang runs a prefill as its own step (without mixed chunked prefill), and every running
request waits while it runs, so a batch band whose requests finish and start again keeps stalling the
interactive band's decoding, up to several long prefills back to back. With ``band_prefill_share`` =
f < 1, while a request of band b is waiting or running (b the earliest band in flight):

- a step admits at most one request of the bands after b;
- the steps that admit such requests take at most a share f of the worker's time, as the host's clock
  measures them: each such step's duration (from the admission's ``tick`` to the next, apportioned by
  the step's extend tokens between the later bands and the rest) is a debt that the clock pays back
  at f / (1 - f) seconds a second, and the later bands are admitted only with no debt left.

So an earlier-band request that runs for L seconds meets at most f / (1 - f) x L + one later-band
prefill of stall from the later bands' prefills (their decoding still shares its steps). Over a long
interval with b in flight the later bands still get f of the time for prefills and every decode step:
they slow down, they do not starve. With no earlier band in flight nothing is paced. Measured only at
admission: the later chunks of a prefill longer than a step's chunk budget are not counted.
"""

from __future__ import annotations


class PrefillPace:
    """The later bands' prefill debt, in seconds of the host's clock."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.debt = 0.0
        self.last: float | None = None  # the clock at the last tick
        self.step: tuple[float, int, int] | None = None  # (admitted at, later-band tokens, all tokens)
        self.paced = 0  # admission steps at which the pace kept a later band out, for inspection

    @property
    def enabled(self) -> bool:
        return 0 < self.share < 1

    def tick(self, now: float) -> None:
        """Pay the debt back for the time since the last tick, then charge the step admitted then."""
        if not self.enabled:
            return
        if self.last is not None and now > self.last:
            self.debt = max(0.0, self.debt - (now - self.last) * self.share / (1.0 - self.share))
        if self.step is not None:
            at, later, total = self.step
            if total and now > at:
                self.debt += (now - at) * later / total
            self.step = None
        self.last = now

    def open(self) -> bool:
        """Whether the later bands may be admitted now (no debt left)."""
        return not self.enabled or self.debt <= 0.0

    def admitted(self, now: float, tokens: int, later: bool) -> None:
        """A request of ``tokens`` extend tokens was admitted at ``now``, of a later band or not."""
        at, later_tokens, total = self.step or (now, 0, 0)
        self.step = (at, later_tokens + (tokens if later else 0), total + tokens)
