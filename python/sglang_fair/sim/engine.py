"""One worker as SGLang runs it, in its simplest form: a deterministic step loop.

Each step admits waiting requests through the admission policy (the real policy object), then runs
one forward pass in which every running request produces one token (the first one comes from the
prefill). Admission reserves the request's uncached input plus its whole output in the KV pool,
evicting least-recently-used unlocked cache leaves as needed, so running requests never run out of
memory. Finished requests put their prompt and output into the prefix cache.
"""

from __future__ import annotations

from collections.abc import Callable

from sglang_fair.admission import AdmissionPolicy, WaitingRequest
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import require
from sglang_fair.core.radix_cache import LocalRadixCache
from sglang_fair.metrics.ledger import ServiceLedger
from sglang_fair.sim.request import SimRequest


class PoolBudget:
    """The capacity check of one admission step: KV pool room and a cap on running requests."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def exhausted(self) -> bool:
        w = self.worker
        return len(w.running) >= w.max_running or w.cache.free_tokens + w.cache.evictable_tokens <= 0

    def try_add(self, req: WaitingRequest) -> bool:
        assert isinstance(req, SimRequest)
        w = self.worker
        if len(w.running) >= w.max_running:
            return False
        req.cached_len, node = w.cache.match_prefix(req.tokens)
        w.cache.lock(node)
        need = req.input_len - req.cached_len + req.output_len
        if not w.cache.alloc(need):
            w.cache.unlock(node)
            return False
        req.node, req.reserved = node, need
        w.running.append(req)
        return True


class Worker:
    """A waiting queue, a running batch and a KV pool with a prefix cache, driven by a policy."""

    def __init__(
        self, index: int, policy: AdmissionPolicy, capacity: int, max_running: int, cost: CostModel
    ) -> None:
        require(max_running >= 1, f"max_running must be >= 1, got {max_running}")
        self.index = index
        self.policy = policy
        self.cache = LocalRadixCache(capacity)
        self.max_running = max_running
        self.cost = cost
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self.service: dict[str, float] = {}  # actual: w_e * extend + w_q * output, per client
        self.perceived: dict[str, float] = {}  # as the client sees it: w_e * input + w_q * output
        self.ledger: ServiceLedger | None = None  # also books service per step when set

    def enqueue(self, req: SimRequest) -> None:
        require(req.input_len + req.output_len <= self.cache.capacity,
                f"request {req.rid} needs {req.input_len + req.output_len} tokens, "
                f"more than the pool's {self.cache.capacity}")
        req.worker = self.index
        self.waiting.append(req)
        self.policy.on_arrival(req)

    def admit(self, now: float) -> list[SimRequest]:
        """Run the admission policy once; return the admitted requests."""
        if not self.waiting:
            return []
        for req in self.waiting:  # what the cache holds now decides the LPM order
            req.cached_len = self.cache.match_prefix(req.tokens)[0]
        admitted = self.policy.select(self.waiting, PoolBudget(self))
        taken = {id(r) for r in admitted}
        self.waiting = [r for r in self.waiting if id(r) not in taken]
        for req in admitted:
            req.admitted_at = now
            req.extend_tokens = req.input_len - req.cached_len
            cost = self.cost
            self._serve(now, req.client, cost.extend_cost(req.extend_tokens), cost.extend_cost(req.input_len))
        return admitted

    def forward(self, now: float, on_finish: Callable[[SimRequest], None]) -> None:
        """One forward pass: every running request produces one token."""
        still_running = []
        for req in self.running:
            req.generated += 1
            if req.first_token_at is None:
                req.first_token_at = now
            self.policy.on_output(req.client, 1)
            self._serve(now, req.client, self.cost.output_cost(1), self.cost.output_cost(1))
            if req.done:
                self._finish(req, now)
                on_finish(req)
            else:
                still_running.append(req)
        self.running = still_running

    def _finish(self, req: SimRequest, now: float) -> None:
        req.finished_at = now
        self.cache.insert(req.tokens + req.output_ids[: req.output_len])
        assert req.node is not None
        self.cache.unlock(req.node)
        self.cache.release(req.reserved)
        req.node, req.reserved = None, 0
        self.policy.on_finish(req)

    def _serve(self, now: float, client: str, actual: float, perceived: float) -> None:
        self.service[client] = self.service.get(client, 0.0) + actual
        self.perceived[client] = self.perceived.get(client, 0.0) + perceived
        if self.ledger is not None:
            self.ledger.add(now, client, self.index, perceived, actual)
