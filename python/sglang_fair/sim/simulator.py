"""The event-driven cluster simulator: a router host and D workers over simulated time.

Events, in time order (ties in insertion order, so runs are deterministic):
- a program arrives: its ready calls are routed (the real routing policy) and queued at a worker;
- a worker's step ends: its effects are applied (``EngineWorker.complete_step``), finished calls
  release their children (closed loop), and the worker starts its next step at once;
- feedback reaches the router ``feedback_delay`` seconds after a finish or an eviction, as over ZMQ
  (evictions only with ``eviction_feedback``).
The run ends when every program finished or at ``max_time``. Policies never read time.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from enum import IntEnum
from pathlib import Path
from typing import Any, NamedTuple

from sglang_fair.admission import make_admission_policy
from sglang_fair.batching import make_batching_policy
from sglang_fair.core.global_tree import token_view
from sglang_fair.core.knee import BatchKnee
from sglang_fair.core.radix_cache import Evicted
from sglang_fair.metrics import ProgramRecord, RequestRecord, RunResult, ServiceLedger
from sglang_fair.routing import make_routing_policy
from sglang_fair.routing.base import WorkerLoad
from sglang_fair.routing.replicas import Replicas
from sglang_fair.sim.batch import StepOutcome
from sglang_fair.sim.config import resolve_engine
from sglang_fair.sim.fit import load_model
from sglang_fair.sim.formation import resolve_batching
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.slo_track import SLORecorder
from sglang_fair.sim.spec import RunSpec
from sglang_fair.sim.steptime import StepTimeModel, preset
from sglang_fair.sim.worker import EngineWorker
from sglang_fair.workloads import Program, ProgramRun

Progress = Callable[[float, int, int], None]


class Routed(NamedTuple):
    """What the router reads of a request: its prompt packed once (the router's tree stores packed
    tokens, so a list would be packed again at every lookup and insert). A named tuple: made once per
    request, and a frozen dataclass sets each field through ``object.__setattr__``."""

    rid: int
    client: str
    tokens: bytes


class Event(IntEnum):
    """What a queued event does; ties in time run in insertion order."""

    ARRIVAL = 0  # a program arrives (data: the Program)
    STEP_END = 1  # a worker's step ends (data: (worker, version of its plan))
    FEEDBACK = 2  # the router hears of a finish, an eviction or a budget (data: a callable)
    DISPATCH = 3  # a client sends a call a finish unblocked, a round trip later (data: (run, call))


ARRIVAL, STEP_END, FEEDBACK, DISPATCH = Event  # module names: the hot loop reads no enum class attributes


class Simulator:
    """Runs one :class:`RunSpec` on a simulated cluster; :meth:`run` returns a :class:`RunResult`."""

    def __init__(self, spec: RunSpec, programs: list[Program] | None = None,
                 model: StepTimeModel | None = None) -> None:
        """``programs`` default to the spec's workload; ``model`` replaces the engine's step-time
        model (else the spec's preset, or its fitted ``step_model``)."""
        self.spec = spec
        self.cfg = spec.cluster
        self.cost = spec.cost
        engine = spec.engine
        step_model, kv = preset(engine.preset)
        if model is None and engine.step_model:
            model = load_model(Path(engine.step_model))
        self.model = model or step_model
        kv = engine.kv_tokens or kv
        engine = resolve_engine(engine, kv)
        routing = replace(spec.routing, worker_capacity=spec.routing.worker_capacity or engine.max_running)
        self.router = (Replicas(routing, self.cfg.router_replicas, self.cfg.replica_sharing,
                                self.cfg.replica_lag)
                       if self.cfg.router_replicas > 1 else make_routing_policy(routing))
        batching = resolve_batching(spec.batching, self.model)
        slos = batching.slo_table()
        self.workers = [
            EngineWorker(i, make_admission_policy(spec.admission), engine, self.model, kv,
                         make_batching_policy(batching), slos)
            for i in range(spec.cluster.dp)
        ]
        self.slo = SLORecorder(slos) if spec.slo else None
        self.programs = spec.programs() if programs is None else programs
        self.max_time = spec.max_time(self.programs)
        self.ledger = ServiceLedger(self.cost, spec.cluster.window)
        self.requests: list[RequestRecord] = []
        self.records = [ProgramRecord(p.pid, p.client, p.arrival, len(p.calls), p.misbehaving, p.metric)
                        for p in self.programs]
        self.runs: dict[int, ProgramRun] = {}
        self._events: list[tuple[float, int, Event, Any]] = []
        self._seq = itertools.count()
        self.now = 0.0
        self.end = 0.0
        self.done_programs = 0
        self._completing: EngineWorker | None = None
        self._version = [0] * spec.cluster.dp  # of each worker's pending step-end event
        self._started = [0.0] * spec.cluster.dp  # start of each worker's current plan
        self._reported = [-math.inf] * spec.cluster.dp  # when each worker last reported its load
        self.knees = [BatchKnee() for _ in range(spec.cluster.dp)]  # each worker's decode steps, measured
        self.decode_plans: list[tuple[float, int, int]] = []  # (start, requests decoding, steps)
        self._literals: dict[int, tuple[tuple[int, ...], bytes]] = {}  # the workload's literal parts, packed

    # ---- event queue ----------------------------------------------------------------------------
    def _push(self, t: float, kind: Event, data: Any) -> None:
        heapq.heappush(self._events, (t, next(self._seq), kind, data))

    def run(self, progress: Progress | None = None) -> RunResult:
        with long_run_collector():
            return self._run(progress)

    def _run(self, progress: Progress | None) -> RunResult:
        wall0 = time.perf_counter()
        for p in self.programs:
            self._push(p.arrival, ARRIVAL, p)
        total = len(self.programs)
        while self._events:
            t, _, kind, data = heapq.heappop(self._events)
            if t > self.max_time:
                break
            self.now = t
            if kind is not FEEDBACK:
                self.end = t  # feedback to the router is not work: it does not extend the run
            if kind is ARRIVAL:
                self._arrive(data)
            elif kind is STEP_END:
                worker, version = data
                if version == self._version[worker.index]:  # else the step was cut short
                    self._step_done(worker)
            elif kind is DISPATCH:
                self._dispatch(*data)
            else:
                data()
            if progress is not None:
                progress(t, self.done_programs, total)
        return RunResult(self.requests, self.records, self.ledger, self.end, len(self.workers),
                         dict(self.cost.client_weights), time.perf_counter() - wall0,
                         sum(w.steps for w in self.workers), self.decode_plans)

    # ---- programs and requests -------------------------------------------------------------------
    def _arrive(self, program: Program) -> None:
        run = ProgramRun(program, literals=self._literals)
        self.runs[program.pid] = run
        for call in run.ready():
            self._dispatch(run, call)

    def _dispatch(self, run: ProgramRun, call: int) -> None:
        p = run.program
        packed = run.packed_prompt(call)  # siblings share it: one match in a waiting queue serves them all
        prompt = token_view(packed)  # the ids, read in place (nothing writes a request's tokens)
        rid = len(self.requests)
        req = EngineRequest(rid=rid, client=p.client, tokens=prompt, output_len=p.calls[call].output_len,
                            arrival=self.now, output_packed=run.output_packed(call), pid=p.pid, call=call,
                            prompt_len=len(prompt), key=packed, packed=packed, slo=p.calls[call].slo)
        self.requests.append(RequestRecord(rid, p.pid, p.client, self.now, len(prompt), req.output_len))
        if self.slo is not None:
            self.slo.on_dispatch(req)
        worker = self.workers[self.router.route(Routed(rid, p.client, packed))]
        self.requests[rid].worker = worker.index
        worker.enqueue(req)
        if worker is self._completing:
            return
        if worker.idle():
            self._start(worker)
        elif worker.truncate(self.now - self._started[worker.index]):
            self._schedule(worker)

    def _start(self, worker: EngineWorker) -> None:
        if worker.start_step(self.now) is not None:
            self._started[worker.index] = self.now
            self._schedule(worker)

    def _schedule(self, worker: EngineWorker) -> None:
        assert worker.plan is not None
        self._version[worker.index] += 1
        end = self._started[worker.index] + worker.plan.duration
        self._push(end, STEP_END, (worker, self._version[worker.index]))

    # ---- step completion ---------------------------------------------------------------------------
    def _step_done(self, worker: EngineWorker) -> None:
        plan = worker.plan
        assert plan is not None
        if plan.kind == "prefill":
            for req, _ in plan.batch:
                rec = self.requests[req.rid]
                if rec.admitted < 0:
                    rec.admitted, rec.cached_len = self._started[worker.index], req.cached_len
        if plan.decoding:
            self.decode_plans.append((self._started[worker.index], plan.decoding, plan.steps))
        if plan.kind == "decode":  # its steps' mean: the context grows by a token a request a step
            context = worker.batch.context + (plan.steps - 1) * plan.decoding // 2
            self.knees[worker.index].observe(plan.decoding, context, plan.duration / plan.steps)
        if self.slo is not None:
            self.slo.on_step(plan, worker.running, self._started[worker.index])
        out = worker.complete_step(self.now)
        self._account(worker, out)
        self._completing = worker  # children dispatched now wait for this worker's next step
        for req in out.finished:
            self._finished(worker, req)
        self._completing = None
        budget = worker.formation.prefill_budget(self.now) if worker.formation is not None else None
        if budget is not None:  # FairBatching's report to the router (pab routes by it)
            idx = worker.index
            self._push(self.now + self.cfg.feedback_delay, FEEDBACK,
                       lambda: self.router.on_prefill_budget(idx, budget))
        if self.now - self._reported[worker.index] >= self.cfg.load_interval:
            self._report_load(worker, len(out.finished))
        if out.evicted and self.cfg.eviction_feedback:
            evs = out.evicted
            idx = worker.index
            self._push(self.now + self.cfg.feedback_delay, FEEDBACK, lambda: self._evicted(idx, evs))
        self._start(worker)

    def _account(self, worker: EngineWorker, out: StepOutcome) -> None:
        now, w = self.now, worker.index
        out.book(self.ledger, now, w, self._started[w])
        for req in out.prefilled:
            rec = self.requests[req.rid]
            rec.first_token = now
            prog = self.records[req.pid]
            if prog.first_token < 0:
                prog.first_token = now
        for req in out.retracted:
            self.requests[req.rid].retractions += 1

    def _report_load(self, worker: EngineWorker, just_finished: int) -> None:
        """The worker's heartbeat: what runs and waits there and its service rate, heard after the
        feedback delay. Running counts the step just run, as the plugin does (its running batch and the
        batch just run): requests that finished in it were running, and the next admission replaces them.
        Waiting is the queue the step's admission left, as the plugin's (SGLang's ``waiting_queue`` after
        the step): requests that arrived during the step are still in the inbox (SGLang's socket)."""
        idx = worker.index
        self._reported[idx] = self.now
        load = WorkerLoad(len(worker.running) + just_finished, len(worker.waiting),
                          worker.policy.service_rate, worker.config.max_running, self.knees[idx].knee())
        self._push(self.now + self.cfg.feedback_delay, FEEDBACK, lambda: self.router.on_load(idx, load))

    def _evicted(self, worker: int, evicted: list[Evicted]) -> None:
        for e in evicted:
            self.router.on_evict(worker, e.packed, e.start)

    def _finished(self, worker: EngineWorker, req: EngineRequest) -> None:
        rec = self.requests[req.rid]
        rec.finished, rec.generated = self.now, req.generated
        idx, client, n = worker.index, req.client, req.generated
        self._push(self.now + self.cfg.feedback_delay, FEEDBACK,
                   lambda: self.router.on_finish(idx, client, n))
        run, delay = self.runs[req.pid], self.cfg.client_delay
        for call in run.finish(req.call):
            if delay:
                self._push(self.now + delay, DISPATCH, (run, call))
            else:
                self._dispatch(run, call)
        if run.finished:
            self.records[req.pid].finished = self.now
            self.done_programs += 1
            del self.runs[req.pid]


@contextmanager
def long_run_collector(young: int = 50_000) -> Iterator[None]:
    """Python's cyclic collector tuned for a run: what exists before it (the workload, the
    policies) is frozen out of the collector's passes, and a young-generation pass waits for
    ``young`` net new containers instead of 700. A run allocates many short-lived containers
    (token lists, step outcomes) that reference counting frees; with the defaults the passes over
    them and over the workload took about a sixth of a run's CPU time. Restored on exit (objects a
    caller froze before stay frozen, with those of the run)."""
    threshold, caller_froze = gc.get_threshold(), gc.get_freeze_count() > 0
    gc.freeze()
    gc.set_threshold(max(threshold[0], young), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        if not caller_froze:
            gc.unfreeze()


def stderr_progress(duration: float, every_s: float = 2.0) -> Progress:
    """A progress callback that prints to stderr at most every ``every_s`` wall seconds."""
    last = [time.perf_counter()]

    def report(t: float, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= every_s:
            last[0] = now
            print(f"  simulated {t:8.1f} s (arrivals until {duration:g} s), programs {done}/{total}",
                  file=sys.stderr, flush=True)

    return report
