"""Peer replicas found by name: every host of ``--peer-addresses`` is resolved again and again, and the
peer's SUB socket is connected to each address it resolves to now.

So one name can stand for all the replicas: a Kubernetes headless Service resolves to the address of
every pod behind it (a Deployment's replicas, which have no stable names of their own), and a replica
that starts, moves or goes is connected or disconnected at the next resolution. A replica that hears
itself this way drops its own notices (``PeerBook.heard``: its run). A failed resolution keeps the
connections there are. IPv4 addresses are used when a name has any, else its IPv6 ones.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import zmq

logger = logging.getLogger("sglang_fair.gateway")
RESOLVE_EVERY_S = 5.0  # how soon a replica that starts (or a pod that moves) is heard, at most
Resolver = Callable[[str, int], Awaitable[list[str]]]


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` stands for now, as ZMQ writes them (IPv6 in brackets)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    v4 = sorted({str(info[4][0]) for info in infos if info[0] == socket.AF_INET})
    return v4 or sorted({f"[{info[4][0]}]" for info in infos if info[0] == socket.AF_INET6})


class PeerEndpoints:
    """The endpoints one ``--peer-addresses`` entry's SUB socket is connected to."""

    def __init__(self, sock: Any, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock, self.host, self.port = sock, host, int(port)
        self.connected: set[str] = set()

    def update(self, addresses: list[str]) -> None:
        """Connect to every address of ``addresses`` not connected yet; disconnect from the gone."""
        now = {f"tcp://{a}:{self.port}" for a in addresses}
        if any(a.startswith("[") for a in addresses):
            self.sock.setsockopt(zmq.IPV6, 1)
        for endpoint in sorted(now - self.connected):
            self.sock.connect(endpoint)
        for endpoint in sorted(self.connected - now):
            self.sock.disconnect(endpoint)
        if now != self.connected:
            logger.info("gateway: peers at %s: %s", self.host, ", ".join(sorted(now)) or "none")
        self.connected = now

    async def follow(self, resolver: Resolver | None = None, every: float | None = None) -> None:
        """Resolve the host every ``every`` s (:data:`RESOLVE_EVERY_S`) with ``resolver``
        (:func:`resolve`) and follow its addresses, until cancelled."""
        failing = False
        while True:
            try:
                self.update(await (resolver or resolve)(self.host, self.port))
                failing = False
            except OSError as err:
                if not failing:
                    logger.warning("gateway: cannot resolve peer %s (keeping %d connections): %s",
                                   self.host, len(self.connected), err)
                failing = True
            await asyncio.sleep(RESOLVE_EVERY_S if every is None else every)
