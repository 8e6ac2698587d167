"""Which servers take requests: a server that cannot be reached, or fails a health probe, is taken out
(its workers marked dead in the routing policy, so new requests go elsewhere); a probe it passes takes
it back. The probe is SGLang's ``GET /health`` (it answers once the scheduler has served a one-token
request, so a stalled scheduler fails it), every ``--health-interval`` seconds with
``--health-timeout``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from sglang_fair.gateway.servers import WorkerTable
from sglang_fair.routing import RoutingPolicy

logger = logging.getLogger("sglang_fair.gateway")
Probe = Callable[[str], Awaitable[bool]]  # a server's base URL -> healthy?


class ServerHealth:
    """The servers taken out, kept in step with the policy's dead workers (one event loop: no lock)."""

    def __init__(self, table: WorkerTable, policy: RoutingPolicy) -> None:
        self.table, self.policy = table, policy
        self.out: dict[str, str] = {}  # base URL -> why it was taken out

    def take_out(self, url: str, why: str) -> None:
        if url in self.out:
            return
        self.out[url] = why
        for worker in self.table.of_server(url):
            self.policy.mark_dead(worker.index)
        logger.warning("gateway: %s taken out: %s", url, why)

    def take_back(self, url: str) -> None:
        if self.out.pop(url, None) is None:
            return
        for worker in self.table.of_server(url):
            self.policy.mark_alive(worker.index)
        logger.warning("gateway: %s healthy again, taken back", url)

    async def check(self, probe: Probe) -> None:
        """Probe every server once, at the same time, and take each out or back."""
        urls = [s.url for s in self.table.servers]
        for url, healthy in zip(urls, await asyncio.gather(*(probe(u) for u in urls)), strict=True):
            if healthy:
                self.take_back(url)
            else:
                self.take_out(url, "failed its health probe")

    async def watch(self, probe: Probe, interval: float) -> None:
        """Check every ``interval`` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            await self.check(probe)
