"""Server host names to addresses for the gateway's connections: one lookup per name at a time, each
answer kept :data:`KEEP_S` seconds.

``getaddrinfo`` blocks, so asyncio runs it on the loop's default executor, a handful of threads. A name
that stopped resolving can hold its thread for the system resolver's whole timeout: a killed
container's name in a Docker network whose DNS forwards nowhere takes about 10 s to fail. The health
watch asks for a dead server every second, so without one-at-a-time lookups every thread soon waits on
the dead name and a live server's lookup queues behind them until its connect timeout (the Docker
check's failover step, 2026-12-01: "no connection within 3 s" to the server that was up). With them
the dead name holds one thread; a live name's cached answer needs none.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

KEEP_S = 10.0  # an answer is reused this long (aiohttp's ttl_dns_cache, which the gateway had before)
Address = tuple[int, str]  # (address family, host address)


class Resolver:
    """Cached, coalesced lookups (use in one event loop). :meth:`addresses` may be cancelled without
    cancelling the lookup others wait on."""

    def __init__(self, keep_s: float = KEEP_S) -> None:
        self.keep_s = keep_s
        self.known: dict[tuple[str, int], tuple[float, list[Address]]] = {}
        self.pending: dict[tuple[str, int], asyncio.Task[list[Address]]] = {}

    async def addresses(self, host: str, port: int) -> list[Address]:
        """``host``'s addresses for a TCP connection to ``port`` (``OSError`` when it does not resolve)."""
        loop = asyncio.get_running_loop()
        key = (host, port)
        hit = self.known.get(key)
        if hit is not None and loop.time() - hit[0] < self.keep_s:
            return hit[1]
        task = self.pending.get(key)
        if task is None:
            task = self.pending[key] = loop.create_task(self._lookup(key))
            task.add_done_callback(_retrieve)
        return await asyncio.shield(task)

    async def _lookup(self, key: tuple[str, int]) -> list[Address]:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(*key, type=socket.SOCK_STREAM)
            found: list[Address] = [(family, str(sockaddr[0])) for family, _, _, _, sockaddr in infos]
            if not found:
                raise OSError(f"{key[0]}: no address")
            self.known[key] = (loop.time(), found)
            return found
        finally:
            self.pending.pop(key, None)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark a lookup's failure seen (every caller may have stopped waiting for it)."""
    if not task.cancelled():
        task.exception()
