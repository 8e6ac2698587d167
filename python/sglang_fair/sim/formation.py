"""Steps of a worker whose batching policy mixes decodes and prefill chunks (``sarathi``,
``fairbatching``, ``slai``; see :mod:`sglang_fair.batching`).

The worker keeps its own loop for SGLang's rule (``--batching sglang``: a step is a prefill or a
decode step, decode steps batched into one event). For a mixing policy each step is one event:

- Admission is the admission policy's, with SGLang's memory and running-cap checks
  (:class:`~sglang_fair.sim.batch.StepBudget`), and a window of ``chunk_size`` prefill tokens: it
  admits while the candidates' remaining prefill is below it (the first may exceed it). Admitted
  requests become prefill candidates; the batching policy decides their chunks, step by step.
- Retraction is the worker's (room for every running decode, as SGLang's check_decode_mem).
- The policy sees every running request (tokens so far, first and last token times, KV length, its
  SLO: its own, else its client's class) and every candidate, in admission order; the plan it returns is
  checked, timed by the worker's step-time model and fed back (``on_step``) when the step ends.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Protocol

from sglang_fair.admission import AdmissionPolicy
from sglang_fair.batching import (
    BatchingConfig,
    BatchingPolicy,
    DecodeView,
    PrefillView,
    SLOTable,
    StepView,
    check_plan,
)
from sglang_fair.core.errors import require
from sglang_fair.core.radix_cache import LocalRadixCache
from sglang_fair.sim.batch import StepBudget, StepOutcome, StepPlan
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.running import RunningBatch
from sglang_fair.sim.steptime import LinearStepModel, StepShape, StepTimeModel
from sglang_fair.sim.waiting import WaitingQueue


class FormationHost(Protocol):
    """What :class:`Formation` reads and calls of its worker (``sim.worker.EngineWorker``)."""

    config: EngineConfig
    cache: LocalRadixCache
    chunked: EngineRequest | None
    policy: AdmissionPolicy
    model: StepTimeModel
    waiting: WaitingQueue
    batch: RunningBatch

    @property
    def running(self) -> list[EngineRequest]: ...
    def future_reservation(self) -> float: ...
    def reserve(self, n: int) -> bool: ...
    def admission_due(self) -> bool: ...
    def admission_failed(self) -> None: ...
    def make_decode_room(self) -> None: ...
    def prefill_done(self, req: EngineRequest, out: StepOutcome) -> None: ...


@dataclass
class FormedPlan(StepPlan):
    """One step as a batching policy formed it: ``decodes`` run one token each beside ``batch``'s chunks."""

    decodes: list[EngineRequest] = field(default_factory=list)
    context: int = 0  # KV tokens the step reads
    start: float = 0.0


class Formation:
    """See the module docstring."""

    def __init__(self, worker: FormationHost, policy: BatchingPolicy, slos: SLOTable) -> None:
        self.w = worker
        self.policy = policy
        self.slos = slos
        self.candidates: list[EngineRequest] = []
        self.started: set[int] = set()  # candidates a chunk of which has run
        self.first: dict[int, float] = {}  # running request -> time of its first token
        self.last: dict[int, float] = {}  # running request -> time of its last token

    def plan(self, now: float) -> FormedPlan | None:
        w = self.w
        self._admit()
        if w.running:
            w.make_decode_room()
        view = self._view(now)
        if not view.decodes and not view.prefills:
            return None
        plan = self.policy.plan(view)
        check_plan(view, plan)
        require(not plan.empty, f"batching policy {self.policy.name} planned nothing with work waiting")
        by_rid: dict[Hashable, EngineRequest] = {r.rid: r for r in w.running}
        decodes = [by_rid[rid] for rid in plan.decodes]
        cands: dict[Hashable, EngineRequest] = {r.rid: r for r in self.candidates}
        chunks = [(cands[rid], n) for rid, n in plan.prefills]
        return self._timed(decodes, chunks, now)

    def prefill_budget(self, now: float) -> float | None:
        """The policy's prefill admission budget for the router, if it reports one."""
        if type(self.policy).prefill_budget is BatchingPolicy.prefill_budget:
            return None
        queued = sum(r.input_len for r in self.w.waiting)
        return self.policy.prefill_budget(self._view(now), queued)

    def _admit(self) -> None:
        w = self.w
        if not (w.waiting and w.admission_due()):
            return
        pending = sum(r.input_len - r.prefilled for r in self.candidates)
        budget = StepBudget(w, max(1, w.config.chunk_size - pending), len(w.running) + len(self.candidates))
        admitted = w.policy.select(w.waiting.view(), budget) if not budget.exhausted() else []
        if admitted:
            w.waiting.remove(admitted)
            self.candidates += admitted
        else:
            w.admission_failed()

    def _view(self, now: float) -> StepView:
        w, slo = self.w, self.slos.resolve
        decodes = [DecodeView(r.rid, r.arrival, self.first[r.rid], r.generated, self.last[r.rid],
                              r.prompt_len + r.generated, slo(r.client, r.slo), r.client) for r in w.running]
        prefills = [PrefillView(r.rid, r.arrival, r.input_len, r.prefilled, slo(r.client, r.slo), r.client,
                                r.rid in self.started, r.generated) for r in self.candidates]
        cache = w.cache
        used = cache.capacity - cache.free_tokens - cache.evictable_tokens
        return StepView(now, decodes, prefills, used, cache.capacity)

    def _timed(self, decodes: list[EngineRequest], chunks: list[tuple[EngineRequest, int]],
               now: float) -> FormedPlan:
        decode_context = sum(r.prompt_len + r.generated for r in decodes)
        n = len(decodes)
        if chunks:
            shape = StepShape.of_prefill([(r.prefilled, c) for r, c in chunks], n, decode_context)
        else:  # a decode step, timed as the worker times its own
            shape = StepShape(requests=n, new_tokens=n, context_tokens=decode_context)
        kind = "prefill" if chunks else "decode"
        return FormedPlan(kind, chunks, [self.w.model.step_time(shape)], decoding=n, decodes=decodes,
                          context=shape.context_tokens, start=now)

    def complete(self, plan: FormedPlan, out: StepOutcome) -> None:
        """Apply ``plan``: one token per decode, the chunks; tell the policy how long it took."""
        w, end = self.w, plan.start + plan.duration
        require(w.reserve(len(plan.decodes)), "internal: decode reservation failed")
        running = w.batch
        for req in plan.decodes:
            req.generated += 1
            req.reserved += 1
            running.left -= 1
            running.context += 1
            out.output[req.client] += 1
            self.last[req.rid] = end
            if req.done:
                running.remove(req)
                out.finished.append(req)
        for req, chunk in plan.batch:
            req.prefilled += chunk
            out.extend[req.client] += chunk
            self.started.add(req.rid)
            if req.prefilled >= req.input_len:
                self.candidates.remove(req)
                self.started.discard(req.rid)
                w.prefill_done(req, out)
                self.first.setdefault(req.rid, end)
                self.last[req.rid] = end
        for req in out.finished:
            self.first.pop(req.rid, None)
            self.last.pop(req.rid, None)
        new = plan.decoding + sum(c for _, c in plan.batch)
        self.policy.on_step(new, plan.context, plan.duration)


def resolve_batching(config: BatchingConfig, model: StepTimeModel) -> BatchingConfig:
    """``config`` with FairBatching's step-time prior taken from the simulator's linear model when
    none is given (its attention term is left for the online fit to find)."""
    if config.step_fixed or config.step_per_token or config.step_per_context or \
            not isinstance(model, LinearStepModel):
        return config
    return replace(config, step_fixed=model.fixed, step_per_context=model.per_context_token,
                   step_per_token=model.per_new_token + model.per_request)
