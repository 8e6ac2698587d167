"""A router in front of N workers, stepped in lockstep: the minimal deterministic cluster loop.

Time advances one unit per step. At each step: requests that have arrived are routed (the real
routing policy) and queued at their worker; every worker admits, then runs one forward pass; the
router hears of finished requests and cache evictions at once. A :class:`Recorder` sees the
cluster before and after admission and after the forward pass of every step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.core.errors import require
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.sim.engine import Worker
from sglang_fair.sim.request import SimRequest


@dataclass(frozen=True)
class ClusterConfig:
    """Shape of the simulated cluster (the routing policy's worker count is ``workers``)."""

    workers: int = 1
    capacity: int = 4096  # KV pool tokens per worker (M)
    max_running: int = 256

    def __post_init__(self) -> None:
        require(self.workers >= 1, f"workers must be >= 1, got {self.workers}")
        require(self.capacity > 0, f"capacity must be > 0, got {self.capacity}")


class Recorder(Protocol):
    def observe(self, phase: str, step: int, cluster: Cluster) -> None:
        """``phase`` is "arrived" (before admission), "admitted" or "forwarded"."""


class Cluster:
    def __init__(self, config: ClusterConfig, admission: AdmissionConfig, routing: RouterConfig) -> None:
        require(routing.num_workers == config.workers, "routing.num_workers must equal workers")
        self.config = config
        self.router = make_routing_policy(routing)
        self.workers = [
            Worker(i, make_admission_policy(admission), config.capacity, config.max_running, admission.cost)
            for i in range(config.workers)
        ]
        self.finished: list[SimRequest] = []
        self.step = 0

    def busy(self) -> bool:
        return any(w.waiting or w.running for w in self.workers)

    def run(self, requests: Iterable[SimRequest], recorder: Recorder | None = None,
            max_steps: int = 1_000_000) -> list[SimRequest]:
        """Serve ``requests`` (any order; arrivals are their ``arrival`` times) until all finish."""
        pending = sorted(requests, key=lambda r: (r.arrival, r.rid))
        nxt = 0
        while nxt < len(pending) or self.busy():
            require(self.step < max_steps, f"simulation did not finish in {max_steps} steps")
            while nxt < len(pending) and pending[nxt].arrival <= self.step:
                req = pending[nxt]
                self.workers[self.router.route(req)].enqueue(req)
                nxt += 1
            self._observe(recorder, "arrived")
            for w in self.workers:
                w.admit(self.step)
            self._observe(recorder, "admitted")
            for w in self.workers:
                w.forward(self.step, self._on_finish)
                for ev in w.cache.evicted:
                    self.router.on_evict(w.index, ev.tokens, ev.start)
                w.cache.evicted.clear()
            self._observe(recorder, "forwarded")
            self.step += 1
        return self.finished

    def _on_finish(self, req: SimRequest) -> None:
        self.finished.append(req)
        self.router.on_finish(req.worker, req.client, req.generated)

    def _observe(self, recorder: Recorder | None, phase: str) -> None:
        if recorder is not None:
            recorder.observe(phase, self.step, self)
