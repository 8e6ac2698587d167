"""What a run records: per-request and per-program times, and service per client per time window.

Service is counted with the cost model's weights: *perceived* service is what the client sees
(w_e * all input tokens + w_q * output tokens), *actual* service is what the system spends
(w_e * extend tokens + w_q * output tokens; a recomputation after a retraction counts again).
Input service is counted when a request's prefill completes, output service per generated token.
Every host books tokens into one :class:`ServiceLedger`, which alone turns them into service.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sglang_fair.core.cost import CostModel
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
class ClientTokens:
    """One client's token counts (cached: input found in the prefix cache at admission; extend: input
    computed, counted again when a retracted request is prefilled again)."""

    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    extend_tokens: int = 0
    output_tokens: int = 0


def _per_window() -> defaultdict[int, float]:
    return defaultdict(float)


class ServiceLedger:
    """The one record of service every host keeps: tokens per client, turned into service by one
    :class:`CostModel`, as totals and, unless ``window`` is None, per (client, window) and per
    (worker, window), both perceived and actual."""

    def __init__(self, cost: CostModel | None = None, window: float | None = 1.0) -> None:
        require(window is None or window > 0, f"metrics window must be > 0, got {window}")
        self.cost = cost or CostModel()
        self._window = window
        self.tokens: defaultdict[str, ClientTokens] = defaultdict(ClientTokens)
        self._totals: dict[str, defaultdict[str, float]] = {
            "perceived": defaultdict(float), "actual": defaultdict(float)}
        self._windows: dict[str, defaultdict[str, defaultdict[int, float]]] = {
            kind: defaultdict(_per_window) for kind in ("perceived", "actual")}
        self.worker_actual: defaultdict[int, defaultdict[int, float]] = defaultdict(_per_window)
        # the dicts _credit adds to at every booking, looked up once
        self._credit_to = (self._totals["perceived"], self._totals["actual"],
                           self._windows["perceived"], self._windows["actual"])

    def book(self, t: float, client: str, worker: int = 0, *, requests: int = 0, input_tokens: int = 0,
             cached_tokens: int = 0, extend_tokens: int = 0, output_tokens: int = 0) -> None:
        """Record work done for ``client`` on ``worker`` at time ``t``: perceived service is
        w_e * input + w_q * output, actual service w_e * extend + w_q * output."""
        tok = self.tokens[client]
        tok.requests += requests
        tok.input_tokens += input_tokens
        tok.cached_tokens += cached_tokens
        tok.extend_tokens += extend_tokens
        tok.output_tokens += output_tokens
        out = self.cost.output_cost(output_tokens)
        self._credit(t, client, worker, self.cost.extend_cost(input_tokens) + out,
                     self.cost.extend_cost(extend_tokens) + out)

    def book_output(self, t: float, client: str, worker: int, output_tokens: int) -> None:
        """``book(t, client, worker, output_tokens=output_tokens)``, for the bookings of every decode
        step: output alone, so perceived and actual service are the same amount."""
        self.tokens[client].output_tokens += output_tokens
        out = self.cost.output_cost(output_tokens)
        self._credit(t, client, worker, out, out)

    def _credit(self, t: float, client: str, worker: int, perceived: float, actual: float) -> None:
        """Add service to the client's totals and, when windows are kept, to window ``t``'s."""
        perceived_total, actual_total, perceived_windows, actual_windows = self._credit_to
        perceived_total[client] += perceived
        actual_total[client] += actual
        if self._window is None:
            return
        k = int(t / self._window)
        if perceived:
            perceived_windows[client][k] += perceived
        if actual:
            actual_windows[client][k] += actual
            self.worker_actual[worker][k] += actual

    def forget(self, client: str) -> None:
        """Drop everything booked for ``client`` (a server bounding its memory of idle clients)."""
        self.tokens.pop(client, None)
        for total in self._totals.values():
            total.pop(client, None)
        for windows in self._windows.values():
            windows.pop(client, None)

    @property
    def keeps_windows(self) -> bool:
        return self._window is not None

    @property
    def window(self) -> float:
        """The length of a window (seconds; steps in the lock-step driver)."""
        require(self._window is not None, "this ledger keeps totals only (window=None)")
        assert self._window is not None
        return self._window

    @property
    def clients(self) -> list[str]:
        return sorted(self.tokens)

    def series(self, client: str, kind: str = "perceived", until: float | None = None) -> list[float]:
        """Service of ``client`` per window from t=0 (a list, one value per window)."""
        window = self.window
        buckets: dict[int, float] = self._windows[kind].get(client, {})
        last = int(until / window) if until is not None else max(buckets, default=-1)
        return [buckets.get(k, 0.0) for k in range(last + 1)]

    def total(self, client: str, kind: str = "perceived", t1: float = 0.0, t2: float = float("inf")) -> float:
        """Service of ``client`` in windows that lie inside [t1, t2] (all of it by default)."""
        if t1 <= 0.0 and t2 == float("inf"):
            return self._totals[kind].get(client, 0.0)
        window = self.window
        lo, hi = t1 / window, t2 / window
        buckets: dict[int, float] = self._windows[kind].get(client, {})
        return sum(v for k, v in buckets.items() if k >= lo - 1e-9 and k + 1 <= hi + 1e-9)
