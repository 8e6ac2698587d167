"""Program arrival times: a Gamma renewal process (rate and coefficient of variation), as in [1] §6.1."""

from __future__ import annotations

import random

from sglang_fair.core.errors import require


def gamma_arrivals(
    rng: random.Random, rate: float, cv: float, duration: float, start: float = 0.0
) -> list[float]:
    """Arrival times in ``[start, start + duration)`` with mean gap 1/rate and gap CV ``cv``.

    Gaps are Gamma(shape=1/cv², scale=cv²/rate); cv = 1 is a Poisson process. The first arrival is
    at ``start`` plus one gap, so clients with equal seeds but different streams do not align.
    """
    require(rate > 0, f"arrival rate must be > 0, got {rate}")
    require(cv > 0, f"arrival CV must be > 0, got {cv}")
    require(duration > 0, f"duration must be > 0, got {duration}")
    shape = 1.0 / (cv * cv)
    scale = cv * cv / rate
    times: list[float] = []
    t = start + rng.gammavariate(shape, scale)
    while t < start + duration:
        times.append(t)
        t += rng.gammavariate(shape, scale)
    return times
