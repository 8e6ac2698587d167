"""What one engine step works on: requests with prefill state, step plans and outcomes, and the
admission budget of a prefill step (SGLang's PrefillAdder)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from sglang_fair.admission import WaitingRequest
from sglang_fair.core.radix_cache import Evicted, LocalRadixCache
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.request import SimRequest


@dataclass(eq=False)
class EngineRequest(SimRequest):
    """A :class:`SimRequest` with the state of chunked prefill and retraction."""

    pid: int = -1
    call: int = -1
    prompt_len: int = 0
    prefilled: int = 0  # tokens of ``tokens`` whose KV exists (reused prefix + computed chunks)
    extend_reserved: int = 0  # pool tokens reserved for the uncached input
    prefills: int = 0  # completed prefills (more than 1 after a retraction)
    key: object = None  # equal prompts share a key object (None after a retraction): one match for all
    sync_clock: int = 0  # while running: the worker's decode clock when generated/reserved were last updated
    finish_clock: int = 0  # while running: the decode clock at which the request produces its last token

    def full_sequence(self) -> list[int]:
        return self.tokens[: self.prompt_len] + self.output_ids[: self.generated]


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


@dataclass
class StepOutcome:
    """What a step did, for the cluster's metrics and the router's feedback."""

    extend: Counter[str] = field(default_factory=Counter)  # prefill tokens computed per client
    output: Counter[str] = field(default_factory=Counter)  # output tokens per client
    prefilled: list[EngineRequest] = field(default_factory=list)  # first prefill completions
    finished: list[EngineRequest] = field(default_factory=list)
    retracted: list[EngineRequest] = field(default_factory=list)
    evicted: list[Evicted] = field(default_factory=list)
    step_ends: list[float] = field(default_factory=list)  # decode: end of each step after the start
    step_output: Counter[str] = field(default_factory=Counter)  # decode: output tokens per step


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
        cache = worker.cache
        self.mem_left = cache.free_tokens + cache.evictable_tokens - worker.future_reservation()
        self.batch: list[tuple[EngineRequest, int]] = []
        self.chunk_taken = worker.chunked is not None

    def exhausted(self) -> bool:
        return self.running >= self.w.config.max_running or self.tokens_left <= 0 or self.mem_left <= 0

    def try_add(self, req: WaitingRequest) -> bool:
        assert isinstance(req, EngineRequest)
        w = self.w
        if self.exhausted():
            return False
        cached, node = w.cache.match_prefix(req.tokens)  # evictions for earlier admissions may shorten it
        extend = req.input_len - cached
        need = extend + req.output_len - req.generated  # a new request reserves all its output
        if need > self.mem_left or (extend > self.tokens_left and self.chunk_taken):
            return False
        w.cache.lock(node)
        if not w.reserve(extend):
            w.cache.unlock(node)
            return False
        req.node, req.cached_len, req.prefilled, req.extend_reserved = node, cached, cached, extend
        chunk = min(extend, self.tokens_left)
        self.chunk_taken = self.chunk_taken or chunk < extend
        self.batch.append((req, chunk))
        self.tokens_left -= max(chunk, 1)
        self.mem_left -= need
        self.running += 1
        return True
