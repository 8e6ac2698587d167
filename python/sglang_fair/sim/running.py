"""A worker's running batch, with decode progress kept by a decode clock.

Every decode step gives each running request one token and one KV slot. Rather than touching every
request at every step, the batch counts decode steps (``clock``); a request's ``generated`` and
``reserved`` are brought up to date (:meth:`RunningBatch.sync`) only when it finishes or is
retracted. Totals the scheduler needs every step (remaining output, KV length, requests per client)
are kept incrementally.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from sglang_fair.sim.request import EngineRequest


class RunningBatch:
    """The running requests of one worker (see the module docstring)."""

    def __init__(self) -> None:
        self.reqs: list[EngineRequest] = []
        self.clock = 0  # decode steps run so far
        self.left = 0  # output tokens the running requests still have to produce
        self.context = 0  # KV tokens of the running requests (prompt + output so far)
        self.clients: Counter[str] = Counter()  # running requests per client

    def __len__(self) -> int:
        return len(self.reqs)

    def __iter__(self) -> Iterator[EngineRequest]:
        return iter(self.reqs)

    def enter(self, req: EngineRequest) -> None:
        """``req`` (prefilled, up to date) joins the batch."""
        self.reqs.append(req)
        req.sync_clock = self.clock
        req.finish_clock = self.clock + req.output_len - req.generated
        self.clients[req.client] += 1
        self.left += req.output_len - req.generated
        self.context += len(req.tokens) + req.generated

    def _leave(self, req: EngineRequest) -> None:
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
        for req in self.reqs:
            self.sync(req)

    def steps_to_first_finish(self) -> int:
        return min(r.finish_clock for r in self.reqs) - self.clock

    def advance(self, steps: int) -> list[EngineRequest]:
        """Run ``steps`` decode steps (at most :meth:`steps_to_first_finish`); return the finished."""
        n = len(self.reqs)
        self.clock += steps
        self.left -= n * steps
        self.context += n * steps
        clock = self.clock
        finished = [r for r in self.reqs if r.finish_clock <= clock]
        if finished:
            self.reqs = [r for r in self.reqs if r.finish_clock > clock]
            for req in finished:
                self.sync(req)
                self._leave(req)
        return finished

    def remove(self, req: EngineRequest) -> None:
        """Take a synced request out of the batch (retraction)."""
        self._leave(req)
        self.reqs.remove(req)
