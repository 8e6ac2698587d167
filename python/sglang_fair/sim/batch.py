"""What one engine step works on: step plans and outcomes, and the admission budget of a prefill
step (SGLang's PrefillAdder)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from sglang_fair.admission import WaitingRequest
from sglang_fair.core.radix_cache import Evicted, LocalRadixCache
from sglang_fair.metrics.ledger import ServiceLedger
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.request import EngineRequest


@dataclass
class StepPlan:
    """A prefill step, or ``steps`` decode steps of the same batch run back to back."""

    kind: str  # "prefill" or "decode"
    batch: list[tuple[EngineRequest, int]]  # (request, new tokens per step)
    ends: list[float]  # end of each step, seconds after the plan's start
    steps: int = 1
    decoding: int = 0  # decode plans: requests in the batch (``batch`` stays empty: they are all running)

    @property
    def duration(self) -> float:
        return self.ends[self.steps - 1]


def _counts() -> defaultdict[str, int]:
    return defaultdict(int)


@dataclass
class StepOutcome:
    """What a step did, for the cluster's metrics and the router's feedback."""

    # per-client counts: defaultdicts, not Counters (a step makes three; a Counter's constructor is Python)
    extend: defaultdict[str, int] = field(default_factory=_counts)  # prefill tokens computed per client
    output: defaultdict[str, int] = field(default_factory=_counts)  # output tokens per client
    prefilled: list[EngineRequest] = field(default_factory=list)  # first prefill completions
    finished: list[EngineRequest] = field(default_factory=list)
    retracted: list[EngineRequest] = field(default_factory=list)
    evicted: list[Evicted] = field(default_factory=list)
    step_ends: list[float] = field(default_factory=list)  # decode: end of each step after the start
    step_output: defaultdict[str, int] = field(default_factory=_counts)  # decode: output tokens per step

    def book(self, ledger: ServiceLedger, now: float, worker: int, started: float) -> None:
        """Book the step's work into ``ledger`` at ``now``; several decode steps (planned at
        ``started``) book each step's tokens in the window in which that step ended."""
        for client, n in self.extend.items():
            ledger.book(now, client, worker, extend_tokens=n)
        if self.step_ends and ledger.keeps_windows:
            window = ledger.window
            for k, steps in steps_per_window(self.step_ends, started, window).items():
                for client, n in self.step_output.items():
                    ledger.book_output((k + 0.5) * window, client, worker, n * steps)
        else:
            for client, n in self.output.items():
                ledger.book_output(now, client, worker, n)
        for req in self.prefilled:
            ledger.book(now, req.client, worker, requests=1, input_tokens=req.prompt_len,
                        cached_tokens=req.cached_len)


def steps_per_window(ends: list[float], started: float, window: float) -> dict[int, int]:
    """How many of the steps ending at ``started + ends`` (ascending) end in each window, by window."""
    first, last = (int((started + end) / window) for end in (ends[0], ends[-1]))
    if first == last:  # the usual case; the windows of ascending ends ascend, so all are in this one
        return {first: len(ends)}
    return Counter(int((started + end) / window) for end in ends)


class BudgetHost(Protocol):
    """What a :class:`StepBudget` reads and reserves of its worker (``sim.worker.EngineWorker``)."""

    config: EngineConfig
    cache: LocalRadixCache
    chunked: EngineRequest | None

    def future_reservation(self) -> float: ...
    def reserve(self, n: int) -> bool: ...


class StepBudget:
    """The admission check of one prefill step (SGLang's PrefillAdder); see the module docstring."""

    def __init__(self, worker: BudgetHost, tokens: int, running: int) -> None:
        self.w = worker
        self.tokens_left = tokens
        self.running = running
        self.committed = worker.future_reservation()  # output the pool must still hold room for
        self.batch: list[tuple[EngineRequest, int]] = []
        self.chunk_taken = worker.chunked is not None
        self.stopped = False  # a request did not fit: SGLang's scheduler admits nothing more this step

    def mem_left(self) -> float:
        """Free + evictable tokens (locked prefixes are not evictable) minus the outputs committed."""
        cache = self.w.cache
        return cache.free_tokens + cache.evictable_tokens - self.committed

    def exhausted(self) -> bool:
        return (self.stopped or self.running >= self.w.config.max_running or self.tokens_left <= 0
                or self.mem_left() <= 0)

    def room(self) -> int:
        """Requests the running cap lets this step still start."""
        return max(self.w.config.max_running - self.running, 0)

    def _refuse(self) -> bool:
        self.stopped = not self.w.config.skip_misfits
        return False

    def try_add(self, req: WaitingRequest) -> bool:
        assert isinstance(req, EngineRequest)
        w = self.w
        if self.exhausted():
            return False
        cached, node = w.cache.match_prefix(req.packed)  # evictions for earlier admissions may shorten it
        extend = req.input_len - cached
        output = req.output_len - req.generated  # a new request reserves all its output
        if extend > self.tokens_left and self.chunk_taken:
            return self._refuse()
        w.cache.lock(node)  # the reused prefix is no longer evictable (SGLang pins it to check)
        if extend + output > self.mem_left() or not w.reserve(extend):
            w.cache.unlock(node)
            return self._refuse()
        req.node, req.cached_len, req.prefilled, req.extend_reserved = node, cached, cached, extend
        chunk = min(extend, self.tokens_left)
        self.chunk_taken = self.chunk_taken or chunk < extend
        self.batch.append((req, chunk))
        self.tokens_left -= max(chunk, 1)
        self.committed += output
        self.running += 1
        return True
