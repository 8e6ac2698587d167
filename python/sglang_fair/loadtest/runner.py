"""Drive programs against a server in real time and record the run as a :class:`RunResult`.

Each program starts at its arrival time (seconds since the run began); a call is sent when every
call it waits for has answered. A failed call ends its program (its children need its text). No
program starts after ``duration``; at ``duration + grace``, on ``stop`` (Ctrl-C) or when every
program is done, calls still in flight are cancelled and counted ``cancelled``. Service is booked
as the simulator books it: input when the first token arrives, output per streamed token.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from sglang_fair.core.cost import CostModel
from sglang_fair.loadtest.prompts import PromptBuilder
from sglang_fair.loadtest.transport import CallOutcome, Clock, request_body, run_clock, stream_call
from sglang_fair.metrics import ProgramRecord, RequestRecord, RunResult, ServiceLedger
from sglang_fair.workloads import Program, ProgramRun

Identity = Callable[[str], tuple[dict[str, str], str | None]]  # client -> (headers, OpenAI user)


# An idle connection is reused only within this many seconds: below the 5 s after which SGLang's and
# vLLM's uvicorn close it (SGLANG_TIMEOUT_KEEP_ALIVE), so a request is not written into a socket the
# server is closing. With aiohttp's default (15 s) against uvicorn, calls sent just as the server's
# keep-alive ran out failed with ServerDisconnectedError (3 of 1,800 in a reproduction; 0 with reuse
# below the server's limit); a multi-turn fidelity run lost 6 of 452 calls as connection errors.
IDLE_REUSE_S = 2.0


@dataclass(frozen=True)
class Target:
    """Where and how calls are sent."""

    url: str  # the full endpoint URL
    api: str
    model: str
    identity: Identity
    ignore_eos: bool = True
    request_timeout: float = 0.0
    max_connections: int = 512
    token_ids: int = 0  # vocabulary size of token-id prompts; 0 = text


@dataclass
class LoadRun:
    """One run's programs and everything measured so far (readable after a cut-short run too)."""

    programs: list[Program]
    target: Target
    cost: CostModel
    duration: float
    grace: float
    window: float = 1.0
    clock: Clock = field(default_factory=run_clock)
    requests: list[RequestRecord] = field(default_factory=list)
    outcomes: list[CallOutcome] = field(default_factory=list)
    errors: dict[str, Counter[str]] = field(default_factory=dict)
    not_sent: Counter[str] = field(default_factory=Counter)
    end_time: float = 0.0

    def __post_init__(self) -> None:
        self.records = [ProgramRecord(p.pid, p.client, p.arrival, len(p.calls), p.misbehaving, p.metric)
                        for p in self.programs]
        self.errors = {p.client: Counter() for p in self.programs}

    async def run(self, stop: asyncio.Event | None = None, progress: bool = False) -> None:
        """Run until every program is done, ``duration + grace`` passes, or ``stop`` is set."""
        stop = stop or asyncio.Event()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        conn = aiohttp.TCPConnector(limit=self.target.max_connections, keepalive_timeout=IDLE_REUSE_S)
        async with aiohttp.ClientSession(timeout=timeout, connector=conn) as session:
            tasks = [asyncio.create_task(self._program(session, p, rec))
                     for p, rec in zip(self.programs, self.records, strict=True)]
            watch: list[asyncio.Future[Any]] = [asyncio.ensure_future(stop.wait())]
            if progress:
                watch.append(asyncio.ensure_future(self._progress()))
            everything: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.wait([everything, watch[0]], timeout=self.duration + self.grace,
                               return_when=asyncio.FIRST_COMPLETED)
            self.end_time = min(self.clock(), self.duration + self.grace)
            for t in (*tasks, *watch):
                t.cancel()
            await asyncio.gather(everything, *watch, return_exceptions=True)

    async def _program(self, session: aiohttp.ClientSession, program: Program, rec: ProgramRecord) -> None:
        await asyncio.sleep(max(0.0, program.arrival - self.clock()))
        state, prompts = ProgramRun(program), PromptBuilder(program, self.target.token_ids)
        pending: dict[asyncio.Task[CallOutcome], int] = {}
        try:
            for i in state.ready():
                pending[asyncio.create_task(self._call(session, program, i, prompts))] = i
            while pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    i = pending.pop(task)
                    out = task.result()
                    if out.error is None and self.target.token_ids and out.token_ids is None:
                        out.error = "no_token_ids"  # the server ignored return_token_ids
                        self.errors[program.client][out.error] += 1
                    if out.error is not None:
                        self.not_sent[program.client] += len(program.calls) - len(state.released)
                        return
                    if rec.first_token < 0 and out.first_token is not None:
                        rec.first_token = out.first_token
                    ids = out.token_ids if self.target.token_ids else None
                    prompts.outputs[i] = ids if ids is not None else out.text
                    for j in state.finish(i):
                        pending[asyncio.create_task(self._call(session, program, j, prompts))] = j
            rec.finished = self.clock()
        finally:
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _call(self, session: aiohttp.ClientSession, program: Program, i: int,
                    prompts: PromptBuilder) -> CallOutcome:
        client, call = program.client, program.calls[i]
        headers, user = self.target.identity(client)
        body = request_body(self.target.api, self.target.model, prompts.prompt(i), call.output_len,
                            self.target.ignore_eos, user)
        out = CallOutcome(sent=self.clock())
        req = RequestRecord(len(self.requests), program.pid, client, out.sent, 0, call.output_len)
        self.requests.append(req)
        self.outcomes.append(out)
        try:
            if self.target.request_timeout > 0:
                async with asyncio.timeout(self.target.request_timeout):
                    await stream_call(session, self.target.url, headers, body, out, self.clock)
            else:
                await stream_call(session, self.target.url, headers, body, out, self.clock)
        except asyncio.CancelledError:
            out.error = out.error or "cancelled"
            raise
        except TimeoutError:
            out.error = "timeout"
        finally:
            if out.error is not None:
                self.errors[client][out.error] += 1
        return out

    def result(self) -> RunResult:
        """The run so far in the simulator's record types (call after :meth:`run`)."""
        ledger = ServiceLedger(self.cost, self.window)
        for req, out in zip(self.requests, self.outcomes, strict=True):
            _book(req, out, ledger)
        return RunResult(self.requests, self.records, ledger, max(self.end_time, 1e-9), 0,
                         dict(self.cost.client_weights))

    async def _progress(self, every_s: float = 2.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            done = sum(1 for r in self.records if r.finished >= 0)
            answered = sum(1 for o in self.outcomes if o.finished is not None)
            errors = sum(sum(c.values()) for c in self.errors.values())
            tokens = sum(o.completion_tokens or 0 for o in self.outcomes)
            now = self.clock()
            print(f"  {now:6.1f}/{self.duration:g}s (+{self.grace:g}s grace)  programs {done}/"
                  f"{len(self.programs)}  calls {answered}/{len(self.outcomes)} answered  "
                  f"{tokens / max(now, 1e-9):.0f} output tok/s  errors {errors}", file=sys.stderr, flush=True)


def _book(req: RequestRecord, out: CallOutcome, ledger: ServiceLedger) -> None:
    """Fill ``req`` from ``out`` and book its service (missing usage books nothing)."""
    req.input_len = out.prompt_tokens or 0
    req.cached_len = out.cached_tokens or 0
    req.generated = out.completion_tokens or 0
    if out.first_token is not None:
        req.first_token = req.admitted = out.first_token  # admission itself is not visible to a client
        if out.prompt_tokens is not None:
            cached = out.cached_tokens or 0
            ledger.book(out.first_token, req.client, requests=1, input_tokens=out.prompt_tokens,
                        cached_tokens=cached, extend_tokens=max(0, out.prompt_tokens - cached))
    if out.finished is not None:
        req.finished = out.finished
    for t, n in out.token_times():
        ledger.book(t, req.client, output_tokens=n)
