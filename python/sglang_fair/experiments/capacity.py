"""Measured capacity: the arrival rate at which a cluster stops keeping up with its offered load.

Definition (used by ``sglang-fair lab paper`` to name its loads). Run a workload with arrivals
sustained for the whole run and look only at the steady-state window ``[t1, t2]``. The *backlog*
B(t) is the number of calls (LLM requests) of programs that have arrived by t and are not finished
at t. Its **growth** over the window, as a share of the calls offered in it,

    g = (dB/dt) / (calls arriving per second)  ~  1 - calls served / calls offered,

with dB/dt the least-squares slope of B over the window (:func:`backlog_growth`), is about 0 while
the cluster keeps up (the queue is stationary: served throughput follows the offered load) and
1 - mu / lambda above capacity (B grows linearly). The **capacity** is the largest rate at which
g <= ``threshold`` (default 0.05; the protocol uses 0.1, see below), found by bisection on the
rate. Calls, not programs, are counted so that a misbehaving client's larger trees weigh what they
ask for. Calls are not all equal (prompt and output lengths vary), so this is a capacity in the workload's own
mix; at the boundary it agrees with "throughput stops following the offered load" by construction
(both compare served with offered work). Queues near rho = 1 fluctuate, and a program's calls
arrive in one lump (a ToT tree is 30 or 340 calls), so g of a stable 10-minute run scatters by
about +-0.1 between seeds: the answer is known to within 10-20%, not better.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from sglang_fair.core.errors import require
from sglang_fair.metrics.ledger import ProgramRecord, RequestRecord


def backlog_growth(programs: Sequence[ProgramRecord], requests: Sequence[RequestRecord],
                   t1: float, t2: float, samples: int = 31) -> float:
    """g over ``[t1, t2]`` (see the module docstring); 0.0 when no call arrived in the window.

    The backlog's growth is the least-squares slope of B(t) sampled at ``samples`` evenly spaced
    times (less sensitive to where the window's ends fall than B(t2) - B(t1)), divided by the rate of
    calls arriving in the window. A program's calls count as arrived at the program's arrival (its
    later calls are not dispatched yet, but they are work it asked for); a call is served when its
    request finished.
    """
    require(t2 > t1, f"empty window [{t1}, {t2}]")
    require(samples >= 2, f"samples must be >= 2, got {samples}")
    arrivals = sorted(p.arrival for p in programs)
    cum_calls = list(accumulate(p.calls for p in sorted(programs, key=lambda p: p.arrival)))
    finishes = sorted(r.finished for r in requests if r.finished >= 0)

    def arrived(t: float) -> int:
        i = bisect_right(arrivals, t)
        return cum_calls[i - 1] if i else 0

    offered = arrived(t2) - arrived(t1)
    if not offered:
        return 0.0
    ts = [t1 + (t2 - t1) * k / (samples - 1) for k in range(samples)]
    bs = [arrived(t) - bisect_right(finishes, t) for t in ts]
    t_mean, b_mean = sum(ts) / samples, sum(bs) / samples
    slope = (sum((t - t_mean) * (b - b_mean) for t, b in zip(ts, bs, strict=True))
             / sum((t - t_mean) ** 2 for t in ts))
    return slope / (offered / (t2 - t1))


@dataclass(frozen=True)
class CapacitySearch:
    """How the bisection runs: start rate, relative precision, stability threshold, run budget."""

    start: float = field(default=1.0, metadata={"help": "first rate tried (any unit the measure takes)"})
    threshold: float = field(default=0.05, metadata={"help": "largest backlog growth counted as stable"})
    precision: float = field(default=0.08, metadata={"help": "stop when hi / lo - 1 is below this"})
    max_runs: int = field(default=10, metadata={"help": "most measurements one search may take"})

    def __post_init__(self) -> None:
        require(self.start > 0, f"start must be > 0, got {self.start}")
        require(0 < self.threshold < 1, f"threshold must be in (0, 1), got {self.threshold}")
        require(self.precision > 0, f"precision must be > 0, got {self.precision}")
        require(self.max_runs >= 2, f"max_runs must be >= 2, got {self.max_runs}")


@dataclass
class CapacityResult:
    """The bracket [stable, unstable] found and every (rate, growth) measured, in order."""

    stable: float
    unstable: float
    trials: list[tuple[float, float]]

    @property
    def capacity(self) -> float:
        """The bracket's geometric mean (the answer is known to within the bracket)."""
        return (self.stable * self.unstable) ** 0.5 if self.stable > 0 else self.unstable / 2


def find_capacity(measure: Callable[[float], float], search: CapacitySearch = CapacitySearch()
                  ) -> CapacityResult:
    """Bisect the rate at which ``measure(rate)`` (a backlog growth) crosses ``search.threshold``.

    Doubles or halves from ``search.start`` until the threshold is bracketed, then bisects
    geometrically. Growth is assumed to rise with the rate (true for a queue; near the boundary
    noise may break it, which only widens the answer by one step).
    """
    trials: list[tuple[float, float]] = []

    def stable(rate: float) -> bool:
        g = measure(rate)
        trials.append((rate, g))
        return g <= search.threshold

    lo, hi = 0.0, 0.0
    rate = search.start
    while len(trials) < search.max_runs and (lo == 0.0 or hi == 0.0):
        if stable(rate):
            lo = rate
            rate *= 2.0
        else:
            hi = rate
            rate /= 2.0
    require(hi > 0, f"still stable at rate {lo:g} after {len(trials)} runs: raise CapacitySearch.start")
    while len(trials) < search.max_runs and (lo == 0.0 or hi / lo - 1 > search.precision):
        mid = (lo * hi) ** 0.5 if lo else hi / 2
        if stable(mid):
            lo = mid
        else:
            hi = mid
    return CapacityResult(lo, hi, trials)
