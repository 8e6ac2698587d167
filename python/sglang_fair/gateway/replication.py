"""The gateway's half of the replica link: peers' notices applied to its router, its own announced.

:class:`Replication` joins a :class:`~sglang_fair.gateway.peers.PeerLink` (the sockets), a
:class:`~sglang_fair.gateway.peers.PeerBook` (what each peer run has in flight) and the gateway's
:class:`~sglang_fair.gateway.routing.GatewayRouter` (the policy's owner): a peer's dispatch is
observed, its finish goes through ``GatewayRouter.finish`` as a peer's ticket, a new peer that hears this
replica gets its requests in flight again, and a peer silent for ``--peer-timeout`` has its requests in
flight released (finished with no output). The router announces this replica's own dispatches and
finishes on the link it was built with (:func:`peer_link`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import time
from collections.abc import Callable
from typing import Any

from sglang_fair.gateway import peer_msgs as pm
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.feedback import OwnPause
from sglang_fair.gateway.peers import PeerBook, PeerLink, Siblings, run_link
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import WorkerTable
from sglang_fair.links.curve import public_key, replica_keys


def table_fingerprint(table: WorkerTable) -> str:
    """The same for two gateways exactly when they number the same servers' ranks alike."""
    layout = [(w.index, w.server.url, w.rank) for w in table]
    return hashlib.blake2b(json.dumps([table.model, layout]).encode(), digest_size=8).hexdigest()


class Replication:
    """Applies the peers' notices to ``router`` and keeps the link alive (single event loop)."""

    def __init__(self, link: PeerLink, router: GatewayRouter,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if router.peers is not link:
            raise ValueError("the router must announce on this link (GatewayRouter(..., peers=link))")
        self.link, self.router, self.clock = link, router, clock
        self.book = PeerBook(link.run, link.table, link.config.timeout)
        self.pause = OwnPause(link.config.timeout / 2, clock())
        self.bad_workers = 0

    def on_notice(self, msg: pm.Notice) -> None:
        peer = self.book.heard(msg, self.clock())
        if peer is None:
            return
        if isinstance(msg, pm.Dispatched):
            if msg.worker >= len(self.router.table):
                self.bad_workers += 1
            elif self.book.dispatched(peer, msg):
                self.router.observe(msg.rid, msg.client, msg.worker, msg.tokens)
        elif isinstance(msg, pm.Finished):
            done = self.book.finished(peer, msg)
            if done is not None:
                self.router.finish(self.router.peer_ticket(done[0], done[1], msg.rid), msg.output_tokens)
        elif self.book.alive(peer, msg):
            self.book.counts["replays_sent"] += self.link.replay()

    def tick(self) -> None:
        """Release what silent peers had in flight (not right after this replica itself stood still:
        their notices wait in its sockets); tell the peers this replica is alive."""
        now = self.clock()
        for worker, client in () if self.pause.late(now) else self.book.expire(now):
            self.router.finish(self.router.peer_ticket(worker, client), 0)
        self.link.alive(self.book.hearing())

    async def run(self) -> None:
        """Hear the peers and tick every ``--peer-interval`` until cancelled (a background duty)."""
        await run_link(self.link, self.on_notice, self.tick)

    def heard_by(self) -> int:
        """How many peer runs with this replica's worker table hear it (apply its notices)."""
        return sum(1 for peer in self.book.runs.values() if peer.agrees and peer.hears_me)

    async def joined(self, others: int, timeout: float) -> None:
        """Wait until ``others`` peer runs hear this replica (its first dispatch counts at every one);
        a ``RuntimeError`` after ``timeout`` seconds."""
        waited = 0.0
        while self.heard_by() < others:
            if waited >= timeout:
                raise RuntimeError(f"the replica link: {self.heard_by()} of the gateway's {others} other "
                                   f"processes hear this one after {timeout:.0f} s")
            await asyncio.sleep(0.05)
            waited += 0.05

    def view(self) -> dict[str, Any]:
        return {"run": self.link.run, "name": self.link.name, "sent_bytes": self.link.sent_bytes,
                "sent": self.link.seq, "bad_workers": self.bad_workers, **self.book.view(self.clock())}


def peer_link(config: GatewayConfig, table: WorkerTable, siblings: Siblings | None = None) -> PeerLink | None:
    """The replica link of ``--peer-port`` (CurveZMQ with ``--feedback-keys``), or of the other processes
    of ``--workers N`` (``siblings``, over ``ipc://``); None without either."""
    if siblings is not None:
        name = f"{config.peer.name or f'{socket.gethostname()}:{config.port}'}/{siblings.index}"
        return PeerLink(config.peer, name, table_fingerprint(table), None, lambda key: b"", siblings=siblings)
    if not config.peer.port:
        return None
    keys, directory = None, config.feedback_keys
    if directory:
        keys = replica_keys(directory, config.feedback_key_name)
    name = config.peer.name or f"{socket.gethostname()}:{config.port}"
    return PeerLink(config.peer, name, table_fingerprint(table), keys, lambda key: public_key(directory, key))
