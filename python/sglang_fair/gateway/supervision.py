"""Which servers take requests, and what happens to the requests on one taken out.

:class:`ServerSupervisor` joins the two sources that judge a server: health probes and failed sends
(``health.py``) and the feedback ports' liveness (``feedback.py``: a worker silent or stalled while
busy). A server taken out by feedback has its requests in flight cut: a whole answer awaited there
ends with :class:`Cut` (the relay answers 503), a stream relayed from there ends with an error event.
Its two loops (:meth:`ServerSupervisor.watch_health`, :meth:`ServerSupervisor.watch_feedback`) are
background duties of the gateway (``duties.py``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from sglang_fair.gateway.feedback import FeedbackListener, OwnPause
from sglang_fair.gateway.health import Probe, ServerHealth
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import ServerInfo, WorkerTable


class Cut(Exception):
    """Feedback took the server out while a request was in flight there (the reason)."""


class Cuttable(Protocol):
    """A stream in flight from a server (``relay.Relay``): ended early with an error event."""

    def cut(self, why: str) -> None: ...


class ServerSupervisor:
    """The servers out and why (:attr:`health`), the cut signal and the streams of each server, and when
    each worker's answers last brought tokens (one event loop: no lock)."""

    def __init__(self, table: WorkerTable, router: GatewayRouter, listener: FeedbackListener | None,
                 heartbeat_timeout: float, health_failures: int = 1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.table, self.router, self.listener, self.clock = table, router, listener, clock
        self.heartbeat_timeout = heartbeat_timeout
        self.health = ServerHealth(table, router, health_failures)
        self.cuts: dict[str, asyncio.Event] = {}  # server URL -> set when feedback takes it out
        self.streams: dict[str, set[Cuttable]] = {}  # server URL -> the streams relayed from it now
        self.answered: dict[int, float] = {}  # worker -> when its answers last brought tokens

    def servers_in(self) -> Sequence[ServerInfo]:
        """The servers not taken out (all of them when every one is out: a request still gets an answer)."""
        if not self.health.reasons:  # the usual case, asked at every /tokenize call
            return self.table.servers
        return [s for s in self.table.servers if s.url not in self.health.reasons] or self.table.servers

    def take_out(self, url: str, why: str) -> None:
        """A send to ``url`` failed: out until a probe passes."""
        self.health.take_out(url, why)

    def streams_at(self, url: str) -> set[Any]:
        """The streams relayed from ``url`` now (a relay adds itself and leaves when it ends)."""
        return self.streams.setdefault(url, set())

    def heard(self, worker: int) -> None:
        """``worker`` sent tokens now (what keeps it in when its feedback falls silent)."""
        self.answered[worker] = self.clock()

    async def watch_health(self, probe: Probe, interval: float) -> None:
        """Probe every server every ``interval`` s until cancelled (a background duty)."""
        await self.health.watch(probe, interval)

    async def watch_feedback(self, interval: float) -> None:
        """Every ``interval`` s: take out (cutting its requests) or back each server with a feedback
        port, until cancelled (a background duty; not right after this process itself stood still)."""
        assert self.listener is not None
        pause = OwnPause(self.heartbeat_timeout / 2, self.clock())
        while True:
            await asyncio.sleep(interval)
            if not pause.late(self.clock()):
                self.judge(self.listener)

    def judge(self, listener: FeedbackListener) -> None:
        """One look at the feedback ports' verdicts."""
        for url, why in listener.verdicts(self.router.busy, self._answered):
            held = "feedback" in self.health.reasons.get(url, {})
            if why is None and held:
                self.health.take_back(url, "feedback")
                self.cuts.pop(url, None)
            elif why is not None and not held:
                self.health.take_out(url, why, "feedback")
                self.cuts.setdefault(url, asyncio.Event()).set()
                for stream in list(self.streams.get(url, ())):
                    stream.cut(why)

    def _answered(self, worker: int) -> float:
        return self.answered.get(worker, -math.inf)

    async def until_cut(self, url: str, work: Awaitable[Any]) -> Any:
        """``work``'s result, unless feedback takes the server at ``url`` out first (:class:`Cut`)."""
        if self.listener is None:
            return await work
        cut = self.cuts.setdefault(url, asyncio.Event())
        task, stop = asyncio.ensure_future(work), asyncio.ensure_future(cut.wait())
        try:
            await asyncio.wait((task, stop), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the client left: the work goes too, and what it got is closed
            task.cancel()
            task.add_done_callback(close_result)
            raise
        finally:
            stop.cancel()
        if not task.done():
            task.cancel()
            raise Cut(self.health.out.get(url, "taken out"))
        return task.result()


def close_result(task: asyncio.Future[Any]) -> None:
    """Close what a finished ``task`` returned (a server's response nobody will read)."""
    if not task.cancelled() and task.exception() is None:
        close = getattr(task.result(), "close", None)
        if callable(close):
            close()
