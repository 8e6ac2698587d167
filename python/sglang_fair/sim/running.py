"""A worker's running batch, with decode progress kept by a decode clock.

Every decode step gives each running request one token and one KV slot. Rather than touching every
request at every step, the batch counts decode steps (``clock``); a request's ``generated`` and
``reserved`` are brought up to date (:meth:`RunningBatch.sync`) only when it finishes or is
retracted. Totals the scheduler needs every step (remaining output, KV length, requests per client)
are kept incrementally.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator

from sglang_fair.sim.request import EngineRequest


class RunningBatch:
    """The running requests of one worker (see the module docstring), in the order they entered,
    with a heap of finish clocks so that the next finish is found without a scan."""

    def __init__(self) -> None:
        self._reqs: dict[EngineRequest, None] = {}  # an ordered set
        self._finishes: list[tuple[int, int, EngineRequest]] = []  # (finish clock, entry seq, request)
        self._seq = 0
        self.clock = 0  # decode steps run so far
        self.left = 0  # output tokens the running requests still have to produce
        self.context = 0  # KV tokens of the running requests (prompt + output so far)
        self.clients: Counter[str] = Counter()  # running requests per client

    def __len__(self) -> int:
        return len(self._reqs)

    def __iter__(self) -> Iterator[EngineRequest]:
        return iter(self._reqs)

    @property
    def reqs(self) -> list[EngineRequest]:
        return list(self._reqs)

    def enter(self, req: EngineRequest) -> None:
        """``req`` (prefilled, up to date) joins the batch."""
        self._reqs[req] = None
        req.sync_clock = self.clock
        req.finish_clock = self.clock + req.output_len - req.generated
        self._seq += 1
        heapq.heappush(self._finishes, (req.finish_clock, self._seq, req))
        self.clients[req.client] += 1
        self.left += req.output_len - req.generated
        self.context += len(req.tokens) + req.generated

    def _leave(self, req: EngineRequest) -> None:
        del self._reqs[req]
        self.clients[req.client] -= 1
        self.left -= req.output_len - req.generated
        self.context -= len(req.tokens) + req.generated

    def sync(self, req: EngineRequest) -> None:
        """Apply the decode steps since ``req``'s last sync: one token and one KV slot each."""
        steps = self.clock - req.sync_clock
        req.generated += steps
        req.reserved += steps
        req.sync_clock = self.clock

    def sync_all(self) -> None:
        for req in self._reqs:
            self.sync(req)

    def _next_finish(self) -> tuple[int, int, EngineRequest] | None:
        """The heap's first live entry (entries of requests that left are dropped on the way)."""
        heap = self._finishes
        while heap:
            clock, _, req = heap[0]
            if req in self._reqs and req.finish_clock == clock:
                return heap[0]
            heapq.heappop(heap)
        return None

    def steps_to_first_finish(self) -> int:
        first = self._next_finish()
        assert first is not None, "steps_to_first_finish of an empty batch"
        return first[0] - self.clock

    def advance(self, steps: int) -> list[EngineRequest]:
        """Run ``steps`` decode steps (at most :meth:`steps_to_first_finish`); return the finished,
        in the order they entered."""
        n = len(self._reqs)
        self.clock += steps
        self.left -= n * steps
        self.context += n * steps
        finished = []
        while (first := self._next_finish()) is not None and first[0] <= self.clock:
            req = heapq.heappop(self._finishes)[2]
            self.sync(req)
            self._leave(req)
            finished.append(req)
        return finished

    def remove(self, req: EngineRequest) -> None:
        """Take a synced request out of the batch (retraction); its heap entry is dropped lazily."""
        self._leave(req)
