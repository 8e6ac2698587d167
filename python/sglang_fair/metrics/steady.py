"""The steady-state protocol: which part of a run the headline metrics cover.

A run whose arrivals stop early and then drains measures the drain: well-behaved clients are
limited by their own demand there, so Jain's index measures how unequal the demands are, not how
fair the scheduler is. With ``--steady-state`` the metrics cover only ``[warmup, duration]``:
arrivals go on for the whole of it (they last ``--duration``), the first ``--warmup`` seconds
(queues filling, caches cold) are left out, and so is everything after the last arrival. With
``--warmup`` alone the window is ``[warmup, end of the run]``. :func:`metrics_window` turns the
config into the ``(t1, t2)`` that :func:`sglang_fair.metrics.summary.summarize` takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.core.errors import require


@dataclass(frozen=True)
class MetricsConfig:
    """Which part of the run the summary covers (flags ``--warmup``, ``--steady-state``)."""

    warmup: float = field(default=0.0, metadata={
        "help": "seconds at the start left out of every metric (arrivals already running)"})
    steady_state: bool = field(default=False, metadata={
        "help": "metrics over [warmup, --duration] only, while arrivals go on (the drain is left "
                "out); the run stops at --duration unless --max-time is given"})

    def __post_init__(self) -> None:
        require(self.warmup >= 0, f"warmup must be >= 0, got {self.warmup}")

    @property
    def windowed(self) -> bool:
        return self.steady_state or self.warmup > 0


def metrics_window(config: MetricsConfig, duration: float, end: float) -> tuple[float, float] | None:
    """``(t1, t2)`` the metrics cover, or None for the whole run (the default, no flag given)."""
    if not config.windowed:
        return None
    t2 = min(duration, end) if config.steady_state else end
    require(config.warmup < t2,
            f"--warmup {config.warmup} leaves no steady-state window (it ends at {t2:g} s)")
    return config.warmup, t2
