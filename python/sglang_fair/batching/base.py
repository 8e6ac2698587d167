"""The batch-formation interface: in one step of one worker, which decodes run and how many prefill
tokens of which requests.

A host (the simulator's worker, a test) drives a :class:`BatchingPolicy` once per step:

    plan(view) -> BatchPlan    view: the step's running decodes with their SLO state, the prefill
                               candidates (admitted by the admission policy, with the prefill tokens
                               they have left), the KV pool, and ``now``
    on_step(new_tokens, context_tokens, seconds)
                               the planned step ran: ``new_tokens`` computed, ``context_tokens`` KV
                               read, ``seconds`` taken (step-time models recalibrate, means update)

Admission (which waiting requests become candidates, and in what order) stays with the admission
policy; batch formation only splits a step between candidates and running decodes. A decode in the
plan produces one token; a prefill entry ``(rid, n)`` computes the next ``n`` prompt tokens (a
candidate with nothing left, a fully cached prompt, may appear with n = 0: it still costs one token,
as in SGLang). Time is never read: ``view.now`` is the clock.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from sglang_fair.batching.slo import SLO, SLOTable
from sglang_fair.core.errors import require


@dataclass(frozen=True)
class DecodeView:
    """A running request (prefill done): ``tokens`` output tokens so far, the last at ``last_token_at``;
    ``context`` its KV length (input + output)."""

    rid: Hashable
    arrival: float
    first_token_at: float
    tokens: int
    last_token_at: float
    context: int
    slo: SLO
    client: str = ""

    @property
    def deadline(self) -> float:
        """When its next token is due for its TPOT as measured (from the first token) to hold:
        ``first_token_at + tokens * TPOT``."""
        return self.first_token_at + self.tokens * self.slo.tpot

    @property
    def envelope_deadline(self) -> float:
        """[3]'s literal envelope, anchored at arrival: ``arrival + TTFT + tokens * TPOT``."""
        return self.slo.deadline(self.arrival, self.tokens)


@dataclass(frozen=True)
class PrefillView:
    """A prefill candidate: ``prefilled`` of its ``input_len`` tokens have KV (cached prefix and
    chunks already run); ``started``: a chunk of it has run (SLAI's active prefill); ``tokens``:
    output tokens produced before a retraction (0 for a new request)."""

    rid: Hashable
    arrival: float
    input_len: int
    prefilled: int
    slo: SLO
    client: str = ""
    started: bool = False
    tokens: int = 0

    @property
    def remaining(self) -> int:
        return self.input_len - self.prefilled

    @property
    def deadline(self) -> float:
        """When the token this prefill produces is due."""
        return self.slo.deadline(self.arrival, self.tokens)


@dataclass(frozen=True)
class StepView:
    """One worker's step: ``prefills`` in the host's order (a prefill in progress first, then the
    admission policy's order); ``kv_used`` of ``kv_capacity`` pool tokens in use."""

    now: float
    decodes: Sequence[DecodeView] = ()
    prefills: Sequence[PrefillView] = ()
    kv_used: int = 0
    kv_capacity: int = 1

    @property
    def memory_use(self) -> float:
        return self.kv_used / self.kv_capacity if self.kv_capacity > 0 else 1.0


def prefill_cost(chunk: int) -> int:
    """Tokens a prefill entry of ``chunk`` new tokens counts against the budget (at least one)."""
    return max(chunk, 1)


@dataclass(frozen=True)
class BatchPlan:
    """What one step runs: decodes (one token each) and prefill chunks ``(rid, new tokens)``."""

    decodes: tuple[Hashable, ...] = ()
    prefills: tuple[tuple[Hashable, int], ...] = ()

    @property
    def tokens(self) -> int:
        return len(self.decodes) + sum(prefill_cost(n) for _, n in self.prefills)

    @property
    def empty(self) -> bool:
        return not self.decodes and not self.prefills

    @property
    def kind(self) -> str:
        """``prefill``, ``decode``, ``mixed`` or ``idle``."""
        if self.decodes and self.prefills:
            return "mixed"
        return "prefill" if self.prefills else "decode" if self.decodes else "idle"


def check_plan(view: StepView, plan: BatchPlan) -> None:
    """Raise ConfigError unless ``plan`` is valid for ``view``: known requests, each at most once,
    chunks within what is left."""
    decodes = {d.rid for d in view.decodes}
    left = {p.rid: p.remaining for p in view.prefills}
    require(len(set(plan.decodes)) == len(plan.decodes), f"a decode is planned twice: {plan.decodes}")
    require(set(plan.decodes) <= decodes, "a planned decode is not running")
    rids = [rid for rid, _ in plan.prefills]
    require(len(set(rids)) == len(rids), f"a prefill is planned twice: {rids}")
    for rid, n in plan.prefills:
        require(rid in left, f"planned prefill {rid!r} is not a candidate")
        ok = 0 <= n <= left[rid] and (n > 0 or left[rid] == 0)
        require(ok, f"prefill {rid!r}: chunk {n} of {left[rid]} left")


@dataclass(frozen=True)
class BatchingConfig:
    """Configuration of a worker's batch formation (flags ``--batch-...``: ``--batch-token-budget``)."""

    flag_prefix: ClassVar[str] = "batch_"

    policy: str = field(default="sglang", metadata={"help": "batch formation policy"})
    token_budget: int = field(default=0, metadata={
        "help": "tokens per step: sarathi's and slai's budget, fairbatching's cap, sglang's chunk size "
                "(the simulator's sglang uses --chunk-size); 0 = the policy's default"})
    ttft: float = field(default=2.0, metadata={
        "help": "default TTFT target, seconds (FairBatching [3]'s SLO for its Azure trace: 2 s)"})
    tpot: float = field(default=0.05, metadata={
        "help": "default TPOT/TBT target, seconds (FairBatching [3]'s SLO for its Azure trace: 50 ms)"})
    slo_classes: str = field(default="", metadata={
        "help": "SLO classes, name=TTFT/TPOT seconds: paying=0.5/0.1,free=2/0.5"})
    client_classes: str = field(default="", metadata={
        "help": "class per client: alice=paying,bob=free (others: the default targets)"})
    envelope: str = field(default="first_token", metadata={
        "help": "fairbatching: anchor of the per-token deadlines: first_token (t0 + k*TPOT, what the "
                "TPOT target as measured needs) or arrival ([3]'s arrival + TTFT + k*TPOT)",
        "choices": ["first_token", "arrival"]})
    time_safety: float = field(default=0.95, metadata={
        "help": "fairbatching: share of the time budget planned, a margin for step-time model error"})
    step_fixed: float = field(default=0.0, metadata={
        "help": "fairbatching's step-time prior, seconds per step (all three 0: the host's model)"})
    step_per_token: float = field(default=0.0, metadata={"help": "prior, seconds per new token"})
    step_per_context: float = field(default=0.0, metadata={"help": "prior, seconds per KV token read"})
    calibration_window: int = field(default=256, metadata={
        "help": "fairbatching: observed steps the step-time model is refitted on"})
    offset: float = field(default=5.0, metadata={
        "help": "slai: delta, mean batch times before the TBT deadline a decode turns critical"})
    offset_high: float = field(default=10.0, metadata={
        "help": "slai: delta when KV use >= --batch-memory-threshold (= --batch-offset: fixed offset)"})
    memory_threshold: float = field(default=0.96, metadata={"help": "slai: KV use that raises delta"})
    max_active: int = field(default=128, metadata={"help": "slai: cap on active requests (alpha)"})
    decode_limit: int = field(default=128, metadata={"help": "slai: decodes per step (beta)"})
    prefill_order: str = field(default="spf", metadata={
        "help": "slai: order of new prefills", "choices": ["spf", "fcfs"]})

    def __post_init__(self) -> None:
        require(self.token_budget >= 0, f"--batch-token-budget must be >= 0, got {self.token_budget}")
        SLOTable.parse(SLO(self.ttft, self.tpot), self.slo_classes, self.client_classes)
        for name in ("step_fixed", "step_per_token", "step_per_context", "offset", "offset_high"):
            value = getattr(self, name)
            require(value >= 0 and math.isfinite(value), f"--batch-{name.replace('_', '-')} must be >= 0")
        require(self.calibration_window >= 1, "--batch-calibration-window must be >= 1")
        require(0 < self.time_safety <= 1, "--batch-time-safety must be in (0, 1]")
        require(0 <= self.memory_threshold <= 1, "--batch-memory-threshold must be in [0, 1]")
        require(self.max_active >= 1, "--batch-max-active must be >= 1")
        require(self.decode_limit >= 1, "--batch-decode-limit must be >= 1")
        require(self.prefill_order in ("spf", "fcfs"), "--batch-prefill-order must be spf or fcfs")
        require(self.envelope in ("first_token", "arrival"),
                "--batch-envelope must be first_token or arrival")

    def slo_table(self) -> SLOTable:
        return SLOTable.parse(SLO(self.ttft, self.tpot), self.slo_classes, self.client_classes)


class BatchingPolicy(ABC):
    """Base class. ``mixes``: a step may hold decodes and prefill chunks together;
    ``default_token_budget``: the budget when ``config.token_budget`` is 0."""

    name: ClassVar[str]
    mixes: ClassVar[bool] = True
    default_token_budget: ClassVar[int] = 512

    def __init__(self, config: BatchingConfig) -> None:
        self.config = config
        self.token_budget = config.token_budget or self.default_token_budget

    @abstractmethod
    def plan(self, view: StepView) -> BatchPlan:
        """The batch of the next step (an empty plan only when ``view`` has no work)."""

    def on_step(self, new_tokens: int, context_tokens: int, seconds: float) -> None:  # noqa: B027
        """Hook: the last planned step ran (``seconds`` long)."""

    def prefill_budget(self, view: StepView, queued_tokens: int) -> float | None:
        """Prefill tokens the worker can still take within its TTFT target, for the router
        (None: this policy reports none). ``queued_tokens``: prefill waiting for admission."""
        return None


def chunk_in_order(prefills: Iterable[PrefillView], tokens: int) -> tuple[list[tuple[Hashable, int]], int]:
    """Chunks of ``prefills``, in order, filling ``tokens``; returns them and the tokens left."""
    out: list[tuple[Hashable, int]] = []
    for p in prefills:
        if tokens <= 0:
            break
        chunk = min(p.remaining, tokens)
        out.append((p.rid, chunk))
        tokens -= prefill_cost(chunk)
    return out, tokens
