"""The steady-state protocol: which part of a run the headline metrics cover.

A run whose arrivals stop early and then drains measures the drain: well-behaved clients are
limited by their own demand there, so Jain's index measures how unequal the demands are, not how
fair the scheduler is. With ``--steady-state`` the metrics cover only ``[warmup, duration]``:
arrivals go on for the whole of it (they last ``--duration``), the first ``--warmup`` seconds
(queues filling, caches cold) are left out, and so is everything after the last arrival. With
``--warmup`` alone the window is ``[warmup, end of the run]``. :func:`metrics_window` turns the
config into the ``(t1, t2)`` that :func:`sglang_fair.metrics.summary.summarize` takes.

Latency is taken over the programs that arrive in the window; one still running when the run stops
counts as waiting until then (a lower bound). Programs that arrive just before the end cannot
finish, so with long programs (a ToT tree takes tens of seconds) the percentiles become those lower
bounds; ``--cooldown C`` leaves the arrivals of the window's last C seconds out of the latency
(they still load the system), so every measured program had C seconds of sustained load to finish
in. Choose C above the P99 latency; ``latency_censored`` in the summary says how many are left.
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

    cooldown: float = field(default=0.0, metadata={
        "help": "seconds at the end of the window whose arrivals are left out of the latency figures"})

    def __post_init__(self) -> None:
        require(self.warmup >= 0, f"warmup must be >= 0, got {self.warmup}")
        require(self.cooldown >= 0, f"cooldown must be >= 0, got {self.cooldown}")

    @property
    def windowed(self) -> bool:
        return self.steady_state or self.warmup > 0 or self.cooldown > 0


def metrics_window(config: MetricsConfig, duration: float, end: float) -> tuple[float, float] | None:
    """``(t1, t2)`` the metrics cover, or None for the whole run (the default, no flag given)."""
    if not config.windowed:
        return None
    t2 = min(duration, end) if config.steady_state else end
    require(config.warmup < t2,
            f"--warmup {config.warmup} leaves no steady-state window (it ends at {t2:g} s)")
    return config.warmup, t2


def latency_window(config: MetricsConfig, window: tuple[float, float] | None) -> tuple[float, float] | None:
    """The arrival times whose programs the latency figures cover: ``window`` less the cooldown."""
    if window is None or not config.cooldown:
        return window
    t1, t2 = window
    require(t2 - config.cooldown > t1,
            f"--cooldown {config.cooldown} leaves no arrivals to measure latency on ([{t1:g}, {t2:g}] s)")
    return t1, t2 - config.cooldown
