"""What a run records: per-request and per-program times, and service per client per time window.

Service is counted with the cost model's weights: *perceived* service is what the client sees
(w_e * all input tokens + w_q * output tokens), *actual* service is what the system spends
(w_e * extend tokens + w_q * output tokens; a recomputation after a retraction counts again).
Input service is counted when a request's prefill completes, output service per generated token.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sglang_fair.core.errors import require


@dataclass
class RequestRecord:
    """One LLM call. Times are simulated seconds; -1 means 'not reached'."""

    rid: int
    pid: int
    client: str
    arrival: float
    input_len: int
    output_len: int
    worker: int = -1
    admitted: float = -1.0
    first_token: float = -1.0
    finished: float = -1.0
    cached_len: int = 0  # prefix found in the worker's cache at first admission
    generated: int = 0
    retractions: int = 0


@dataclass
class ProgramRecord:
    pid: int
    client: str
    arrival: float
    calls: int
    misbehaving: bool
    metric: str  # "e2e" or "ttft"
    first_token: float = -1.0
    finished: float = -1.0

    def latency(self) -> float | None:
        end = self.first_token if self.metric == "ttft" else self.finished
        return None if end < 0 else end - self.arrival


@dataclass
class ServiceLedger:
    """Service per (client, window) and per (worker, window), both perceived and actual."""

    window: float = 1.0
    perceived: defaultdict[str, defaultdict[int, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    actual: defaultdict[str, defaultdict[int, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    worker_actual: defaultdict[int, defaultdict[int, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))

    def __post_init__(self) -> None:
        require(self.window > 0, f"metrics window must be > 0, got {self.window}")

    def add(self, t: float, client: str, worker: int, perceived: float, actual: float) -> None:
        k = int(t / self.window)
        if perceived:
            self.perceived[client][k] += perceived
        if actual:
            self.actual[client][k] += actual
            self.worker_actual[worker][k] += actual

    def series(self, client: str, kind: str = "perceived", until: float | None = None) -> list[float]:
        """Service of ``client`` per window from t=0 (a list, one value per window)."""
        book = self.perceived if kind == "perceived" else self.actual
        buckets: dict[int, float] = book.get(client, {})
        last = int(until / self.window) if until is not None else max(buckets, default=-1)
        return [buckets.get(k, 0.0) for k in range(last + 1)]

    def total(self, client: str, kind: str = "perceived", t1: float = 0.0, t2: float = float("inf")) -> float:
        """Service of ``client`` in windows that lie inside [t1, t2]."""
        book = self.perceived if kind == "perceived" else self.actual
        lo, hi = t1 / self.window, t2 / self.window
        return sum(v for k, v in book.get(client, {}).items() if k >= lo - 1e-9 and k + 1 <= hi + 1e-9)
