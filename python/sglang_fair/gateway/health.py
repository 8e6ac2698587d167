"""Which servers take requests: a server that cannot be reached, fails a health probe, or whose feedback
says a worker is dead or stalled (``feedback.py``) is taken out (its workers marked dead in the
routing policy, so new requests go elsewhere); it is taken back once each source that took it out
passes again (a probe, moving heartbeats). The probe is SGLang's ``GET /health`` (it answers once
the scheduler has served a one-token request, so a stalled scheduler fails it), every
``--health-interval`` seconds with ``--health-timeout``; ``--health-failures`` failed probes in a row
take a server out (one slow answer from a busy server does not), one passed probe takes it back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from sglang_fair.gateway.servers import WorkerTable

logger = logging.getLogger("sglang_fair.gateway")
Probe = Callable[[str], Awaitable[bool]]  # a server's base URL -> healthy?


class Marks(Protocol):
    """Where a server's workers are marked dead or alive (``routing.GatewayRouter``, the policy's owner)."""

    def mark_dead(self, worker: int) -> None: ...
    def mark_alive(self, worker: int) -> None: ...


class ServerHealth:
    """The servers taken out, kept in step with the router's dead workers (one event loop: no lock).
    A server is out while any source (``probe``: failed probes or a failed send; ``feedback``)
    holds it out; the view ``out`` gives each one's first reason."""

    def __init__(self, table: WorkerTable, marks: Marks, probe_failures: int = 1) -> None:
        self.table, self.marks, self.probe_failures = table, marks, probe_failures
        self.reasons: dict[str, dict[str, str]] = {}  # base URL -> source -> why it was taken out
        self.failed: dict[str, int] = {}  # base URL -> probes failed in a row

    @property
    def out(self) -> dict[str, str]:
        return {url: next(iter(why.values())) for url, why in self.reasons.items()}

    def take_out(self, url: str, why: str, source: str = "probe") -> None:
        held = self.reasons.setdefault(url, {})
        if source in held:
            return
        held[source] = why
        if len(held) == 1:
            for worker in self.table.of_server(url):
                self.marks.mark_dead(worker.index)
        logger.warning("gateway: %s taken out: %s", url, why)

    def take_back(self, url: str, source: str = "probe") -> None:
        held = self.reasons.get(url, {})
        if held.pop(source, None) is None:
            return
        if held:
            logger.warning("gateway: %s passes its %s check, still out: %s", url, source, self.out[url])
            return
        del self.reasons[url]
        for worker in self.table.of_server(url):
            self.marks.mark_alive(worker.index)
        logger.warning("gateway: %s healthy again, taken back", url)

    async def check(self, probe: Probe) -> None:
        """Probe every server once, at the same time, and take each out or back."""
        urls = [s.url for s in self.table.servers]
        for url, healthy in zip(urls, await asyncio.gather(*(probe(u) for u in urls)), strict=True):
            self.failed[url] = 0 if healthy else self.failed.get(url, 0) + 1
            if healthy:
                self.take_back(url)
            elif self.failed[url] >= self.probe_failures:
                self.take_out(url, f"failed {self.failed[url]} health probes in a row")

    async def watch(self, probe: Probe, interval: float) -> None:
        """Check every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.check(probe)
