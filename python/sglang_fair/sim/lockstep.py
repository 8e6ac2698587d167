"""The simulator's engine in lock-step: the minimal deterministic cluster loop of the demo and the
property tests.

Time is the step index (policies that measure service per second measure it per step). At each step:
requests that have arrived are routed (the real routing policy) and queued at their worker; every worker
runs one step of the simulator's own :class:`EngineWorker`, configured as the simplest engine SGLang can
be (:meth:`LockstepConfig.engine`): prefill and decode mixed in one step (every running request produces
a token while new ones prefill, the first token coming from the prefill), no chunking, every request's
whole output reserved (``ignore_eos``), so nothing is ever retracted, and admission tried at every step.
The router hears of finished requests and cache evictions at once. A :class:`Recorder` sees the cluster
at the start of each step ("arrived"), after admission ("admitted") and after the step ("forwarded")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.core.errors import require
from sglang_fair.metrics.ledger import RequestRecord, ServiceLedger
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.sim.batch import StepPlan
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.steptime import StepShape
from sglang_fair.sim.worker import EngineWorker


@dataclass(frozen=True)
class LockstepConfig:
    """Shape of the lock-step cluster (the routing policy's worker count is ``workers``)."""

    workers: int = 1
    capacity: int = 4096  # KV pool tokens per worker (M)
    max_running: int = 256

    def __post_init__(self) -> None:
        require(self.workers >= 1, f"workers must be >= 1, got {self.workers}")
        require(self.capacity > 0, f"capacity must be > 0, got {self.capacity}")
        require(self.max_running >= 1, f"max_running must be >= 1, got {self.max_running}")

    def engine(self) -> EngineConfig:
        """The worker: mixed steps, no chunking, whole outputs reserved, admission at every step that
        goes on past a request that does not fit (the papers' model of admission)."""
        return EngineConfig(kv_tokens=self.capacity, chunk_size=self.capacity + self.max_running,
                            max_running=self.max_running, ignore_eos=True, skip_misfits=True,
                            mixed_chunk=True, retry_every=1, max_decode_steps=1)


class NoTime:
    """Steps take no simulated time: the lock-step driver's clock counts steps."""

    def step_time(self, shape: StepShape) -> float:
        return 0.0


class Recorder(Protocol):
    def observe(self, phase: str, step: int, cluster: Lockstep) -> None:
        """``phase`` is "arrived" (before admission), "admitted" or "forwarded"."""


class Lockstep:
    """A router in front of ``config.workers`` engine workers, stepped together."""

    def __init__(self, config: LockstepConfig, admission: AdmissionConfig, routing: RouterConfig) -> None:
        require(routing.num_workers == config.workers, "routing.num_workers must equal workers")
        self.config = config
        self.router = make_routing_policy(routing)
        engine = config.engine()
        self.workers = [EngineWorker(i, make_admission_policy(admission), engine, NoTime(), config.capacity)
                        for i in range(config.workers)]
        self.ledger = ServiceLedger(admission.cost, window=1.0)  # window k: the work of step k
        self.records: dict[int, RequestRecord] = {}
        self.finished: list[EngineRequest] = []
        self.step = 0

    def busy(self) -> bool:
        return any(w.waiting or w.batch or w.chunked or w.inbox for w in self.workers)

    def run(self, requests: Iterable[EngineRequest], recorder: Recorder | None = None,
            max_steps: int = 1_000_000) -> list[EngineRequest]:
        """Serve ``requests`` (any order; arrivals are their ``arrival`` times) until all finish."""
        pending = sorted(requests, key=lambda r: (r.arrival, r.rid))
        nxt = 0
        while nxt < len(pending) or self.busy():
            require(self.step < max_steps, f"simulation did not finish in {max_steps} steps")
            while nxt < len(pending) and pending[nxt].arrival <= self.step:
                self._arrive(pending[nxt])
                nxt += 1
            self._observe(recorder, "arrived")
            plans = [w.start_step(float(self.step)) for w in self.workers]
            self._observe(recorder, "admitted")
            for worker, plan in zip(self.workers, plans, strict=True):
                if plan is not None:
                    self._complete(worker, plan)
            self._observe(recorder, "forwarded")
            self.step += 1
        return self.finished

    def _arrive(self, req: EngineRequest) -> None:
        self.records[req.rid] = RequestRecord(req.rid, req.rid, req.client, req.arrival, req.input_len,
                                              req.output_len)
        self.workers[self.router.route(req)].enqueue(req)
        self.records[req.rid].worker = req.worker

    def _complete(self, worker: EngineWorker, plan: StepPlan) -> None:
        step = self.step
        for req, _ in plan.batch:
            rec = self.records[req.rid]
            if rec.admitted < 0:
                rec.admitted, rec.cached_len = step, req.cached_len
        out = worker.complete_step()
        out.book(self.ledger, step, worker.index, step)
        for req in out.prefilled:
            self.records[req.rid].first_token = step
        for req in out.finished:
            rec = self.records[req.rid]
            rec.finished, rec.generated = step, req.generated
            self.finished.append(req)
            self.router.on_finish(worker.index, req.client, req.generated)
        for ev in out.evicted:
            self.router.on_evict(worker.index, ev.packed, ev.start)

    def _observe(self, recorder: Recorder | None, phase: str) -> None:
        if recorder is not None:
            recorder.observe(phase, self.step, self)
