"""SLO metrics ([3] §5.1): TTFT, TPOT as the worst running average per request, attainment, goodput.

A request's TPOT is, as [3] measures it, the largest over its output tokens k >= 1 of
``(t_k - t_0) / k`` (t_0: the first token): its worst-case generation rate so far, which is within
the target exactly when every token met [3]'s envelope deadline counted from the first token. A
request meets its SLO when TTFT <= target and TPOT <= target; goodput is the number of such requests
per second of the run ([3]'s effective RPS: offered rate x share meeting both). Requests that never
produced a token count with infinite TTFT (percentiles are nearest-rank, so they stay honest).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sglang_fair.metrics.stats import percentile

QUANTILES = (50, 90, 99)


@dataclass
class TokenTrack:
    """One request's token times, kept as running figures (no list of times)."""

    arrival: float
    ttft_slo: float
    tpot_slo: float
    first: float = math.nan
    count: int = 0
    max_tpot: float = 0.0

    def on_token(self, t: float) -> None:
        """Output token number ``count`` (0 = the first) was produced at ``t``."""
        if self.count == 0:
            self.first = t
        else:
            self.max_tpot = max(self.max_tpot, (t - self.first) / self.count)
        self.count += 1

    @property
    def ttft(self) -> float:
        return self.first - self.arrival if self.count else math.inf

    @property
    def met(self) -> bool:
        return self.ttft <= self.ttft_slo and self.max_tpot <= self.tpot_slo


def slo_summary(tracks: Iterable[TokenTrack], duration: float) -> dict[str, Any]:
    """TTFT and TPOT percentiles (seconds), attainment shares and goodput (requests/s)."""
    ts = list(tracks)
    n = len(ts)
    out: dict[str, Any] = {"requests": n}
    for q in QUANTILES:
        out[f"ttft_p{q}"] = percentile((t.ttft for t in ts), q, nearest_rank=True)
        out[f"tpot_p{q}"] = percentile((t.max_tpot for t in ts if t.count), q, nearest_rank=True)
    met = sum(t.met for t in ts)
    out["ttft_attainment"] = sum(t.ttft <= t.ttft_slo for t in ts) / n if n else math.nan
    out["tpot_attainment"] = sum(t.count > 0 and t.max_tpot <= t.tpot_slo for t in ts) / n if n else math.nan
    out["slo_attainment"] = met / n if n else math.nan
    out["goodput"] = met / duration if duration > 0 else math.nan
    return out
