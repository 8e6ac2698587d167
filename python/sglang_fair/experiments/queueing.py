"""Whether a waiting queue formed, and how large the decode batch ran: the two figures that show
[1]'s mechanism (LPM keeps the decode batch large when memory, not the running cap, limits admission).

:func:`mean_wait` is the mean time a call waited from its dispatch to a worker until its first
admission; :func:`mean_decode_batch` the mean number of requests in a decode step. Both read only a
:class:`~sglang_fair.metrics.summary.RunResult` and a time window.
"""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.core.errors import require
from sglang_fair.metrics.ledger import RequestRecord


def mean_wait(requests: Sequence[RequestRecord], t1: float, t2: float, end: float) -> float | None:
    """Mean seconds from dispatch to first admission of the calls dispatched in ``[t1, t2)``; a call
    not admitted by ``end`` counts as waiting until ``end`` (a lower bound). None if no call."""
    require(t2 > t1, f"empty window [{t1}, {t2}]")
    waits = [(r.admitted if r.admitted >= 0 else end) - r.arrival for r in requests if t1 <= r.arrival < t2]
    return sum(waits) / len(waits) if waits else None


def mean_decode_batch(plans: Sequence[tuple[float, int, int]], t1: float, t2: float) -> float | None:
    """Mean requests per decode step over the plans ``(start, requests decoding, steps)`` starting in
    ``[t1, t2)``, each step counted once (a plan of k steps weighs k). None if no decode step."""
    require(t2 > t1, f"empty window [{t1}, {t2}]")
    inside = [(n, k) for start, n, k in plans if t1 <= start < t2]
    steps = sum(k for _, k in inside)
    return sum(n * k for n, k in inside) / steps if steps else None
