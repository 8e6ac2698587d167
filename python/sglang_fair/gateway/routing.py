"""The routing policy over every server's workers: one policy object, one global tree, global indices.

:class:`GatewayRouter` hands the registry's policy (``make_routing_policy``) a request of token ids
and turns the worker it picks into a (server, rank) :class:`Ticket`; the finish of the response
(heard at the HTTP level when the gateway has relayed its last byte) goes back as ``on_finish``;
evictions come from the servers' feedback ports (``feedback.py``). It also keeps each client's
requests in flight: over ``client_max_inflight`` a request is refused (:class:`ClientOverLimit`, 429),
and a client with none in flight for ``client_ttl`` seconds is forgotten by the policy (its counters:
one that returns is a new client), as the router process does.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.gateway.servers import Worker, WorkerTable
from sglang_fair.routing import RoutingPolicy


@dataclass(frozen=True)
class RoutedPrompt:
    """What the policy reads of a request (``sglang_fair.routing.RouteRequest``): its prompt packed."""

    rid: str
    client: str
    tokens: bytes


@dataclass(frozen=True)
class Ticket:
    """One routed request: where it went, for whom, on how many prompt tokens."""

    rid: str
    client: str
    worker: Worker
    prompt_tokens: int


class ClientOverLimit(Exception):
    """The client already has as many requests in flight as the gateway allows one client."""


class GatewayRouter:
    """The routing policy's host in the gateway (single event loop: no locking)."""

    def __init__(self, policy: RoutingPolicy, table: WorkerTable, client_max_inflight: int = 0,
                 client_ttl: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        if policy.config.num_workers != len(table):
            raise ValueError(f"the policy has {policy.config.num_workers} workers, the table {len(table)}")
        self.policy, self.table = policy, table
        self.client_max_inflight, self.client_ttl, self.clock = client_max_inflight, client_ttl, clock
        self._ids = itertools.count()
        self.routed = [0] * len(table)
        self.finished = [0] * len(table)
        self.inflight: Counter[str] = Counter()  # client -> requests in flight
        self.last_active: OrderedDict[str, float] = OrderedDict()  # client -> last event, oldest first
        self.forgotten = 0

    def route(self, client: str, tokens: Sequence[int]) -> Ticket:
        """Pick a worker for ``client``'s prompt ``tokens`` (raises ``NoWorkerError`` if none is alive,
        :class:`ClientOverLimit` if the client is at its bound)."""
        if 0 < self.client_max_inflight <= self.inflight[client]:
            raise ClientOverLimit(f"client {client!r} already has {self.inflight[client]} requests in flight "
                                  "(the gateway's limit per client); retry later")
        rid = f"gw-{next(self._ids)}"
        index = self.policy.route(RoutedPrompt(rid, client, pack_tokens(tokens)))
        self.routed[index] += 1
        self.inflight[client] += 1
        self._touch(client)
        return Ticket(rid, client, self.table[index], len(tokens))

    def finish(self, ticket: Ticket, output_tokens: int) -> None:
        """The response of ``ticket`` ended (completed, failed or cut) after ``output_tokens``."""
        self.finished[ticket.worker.index] += 1
        self.policy.on_finish(ticket.worker.index, ticket.client, max(0, output_tokens))
        self.inflight[ticket.client] -= 1
        if not self.inflight[ticket.client]:
            del self.inflight[ticket.client]
        self._touch(ticket.client)

    def _touch(self, client: str) -> None:
        if self.client_ttl > 0:
            self.last_active[client] = self.clock()
            self.last_active.move_to_end(client)

    def expire(self) -> list[str]:
        """Forget the clients without a request in flight for ``client_ttl`` seconds."""
        gone: list[str] = []
        now = self.clock()
        while self.last_active:
            client, seen = next(iter(self.last_active.items()))
            if now - seen <= self.client_ttl:
                break
            del self.last_active[client]
            if self.inflight[client]:
                self._touch(client)  # a long request: look again a TTL later
                continue
            self.policy.forget(client)
            gone.append(client)
        self.forgotten += len(gone)
        return gone

    def state(self) -> dict[str, object]:
        """Per worker: server, rank, requests routed, finished and in flight (the policy's queue)."""
        return {"policy": self.policy.name, "model": self.table.model,
                "clients_in_flight": len(self.inflight), "forgotten_clients": self.forgotten, "workers": [
            {"index": w.index, "server": w.server.url, "rank": w.rank, "routed": self.routed[w.index],
             "finished": self.finished[w.index], "queue": self.policy.queue[w.index]}
            for w in self.table]}
