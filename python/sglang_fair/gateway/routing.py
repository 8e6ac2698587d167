"""The routing policy over every server's workers: one policy object, one global tree, global indices.

:class:`GatewayRouter` owns the registry's policy (``make_routing_policy``); everything the gateway
tells the policy goes through it. It hands the policy a request of token ids and turns the worker it
picks into a (server, rank) :class:`Ticket`; every finish, this replica's own (heard at the HTTP level
when the gateway has relayed its last byte) and its peer replicas' (``replication.py``), comes back
through :meth:`GatewayRouter.finish`, so its counts hold ``queue = routed + observed - finished`` per
worker; evictions and load reports (``feedback.py``) and the servers taken out or back (``supervision.py``)
too. It also
keeps each client's requests in flight (``routing/clients.py``, the router process's book too): over
``client_max_inflight`` a request is refused (``ClientOverLimit``, 429), and a client with none in
flight for ``client_ttl`` seconds is forgotten by the policy (its counters: one that returns is a new
client). The tenant file's budgets (``edge/budgets.py``) are kept here too, charged with this
replica's dispatches and finishes and its peers' (so two replicas enforce one budget): a tenant over
its budget is refused (``OverBudget``, 429 with ``Retry-After``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sglang_fair.core.global_tree import WIDTH, pack_tokens
from sglang_fair.edge.budgets import BudgetBook
from sglang_fair.gateway.servers import Worker, WorkerTable
from sglang_fair.routing import RoutingPolicy
from sglang_fair.routing.clients import ClientBook
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.state import load_of


@dataclass(frozen=True)
class RoutedPrompt:
    """What the policy reads of a request (``sglang_fair.routing.RouteRequest``): its prompt packed."""

    rid: str
    client: str
    tokens: bytes


class Announcer(Protocol):
    """Where this gateway tells its peer replicas of its dispatches and finishes (``peers.PeerLink``)."""

    def dispatched(self, rid: str, client: str, worker: int, tokens: bytes) -> None: ...
    def finished(self, rid: str, output_tokens: int) -> None: ...


@dataclass(frozen=True)
class Ticket:
    """One routed request: where it went, for whom, on how many prompt tokens; ``peer``: a peer
    replica routed it (this replica observed it)."""

    rid: str
    client: str
    worker: Worker
    prompt_tokens: int
    peer: bool = False


class GatewayRouter:
    """The routing policy's host in the gateway (single event loop: no locking)."""

    def __init__(self, policy: RoutingPolicy, table: WorkerTable, client_max_inflight: int = 0,
                 client_ttl: float = 0.0, clock: Callable[[], float] = time.monotonic,
                 peers: Announcer | None = None, budgets: BudgetBook | None = None) -> None:
        if policy.config.num_workers != len(table):
            raise ValueError(f"the policy has {policy.config.num_workers} workers, the table {len(table)}")
        self.policy, self.table, self.clock, self.peers = policy, table, clock, peers
        self.clients = ClientBook(client_ttl, client_max_inflight, "gateway")
        self.budgets = budgets if budgets is not None else BudgetBook({})
        self._ids = itertools.count()
        self.routed = [0] * len(table)
        self.observed = [0] * len(table)  # dispatches of peer replicas recorded
        self.finished = [0] * len(table)  # this replica's and its peers'
        self.forgotten = 0

    def route(self, client: str, tokens: Sequence[int]) -> Ticket:
        """Pick a worker for ``client``'s prompt ``tokens`` (raises ``NoWorkerError`` if none is alive,
        ``ClientOverLimit`` if the client is at its bound, ``OverBudget`` if it used its budget)."""
        now = self.clock()
        self.budgets.check(client, now)
        self.clients.admit(client)
        rid = f"gw-{next(self._ids)}"
        packed = pack_tokens(tokens)
        index = self.policy.route(RoutedPrompt(rid, client, packed))
        self.routed[index] += 1
        self.budgets.charge(client, now, requests=1, tokens=len(tokens))
        self.clients.enter(client, now)
        if self.peers is not None:
            self.peers.dispatched(rid, client, index, packed)
        return Ticket(rid, client, self.table[index], len(tokens))

    def finish(self, ticket: Ticket, output_tokens: int) -> None:
        """The response of ``ticket`` ended (completed, failed or cut) after ``output_tokens``; a peer's
        ticket (:meth:`peer_ticket`) when the peer said so or was released silent."""
        output_tokens = max(0, output_tokens)
        self.budgets.charge(ticket.client, self.clock(), tokens=output_tokens)
        self.finished[ticket.worker.index] += 1
        self.policy.on_finish(ticket.worker.index, ticket.client, output_tokens)
        if not ticket.peer:
            self.clients.leave(ticket.client)
            if self.peers is not None:
                self.peers.finished(ticket.rid, output_tokens)
        self.clients.touch(ticket.client, self.clock())

    def observe(self, rid: str, client: str, worker: int, tokens: bytes) -> None:
        """A peer replica dispatched ``rid`` to ``worker``: the policy records it as its own."""
        self.policy.observe(RoutedPrompt(rid, client, tokens), worker)
        now = self.clock()
        self.budgets.charge(client, now, requests=1, tokens=len(tokens) // WIDTH)
        self.clients.touch(client, now)  # a client busy at a peer is not idle here
        self.observed[worker] += 1

    def peer_ticket(self, worker: int, client: str, rid: str = "") -> Ticket:
        """The ticket of a request a peer replica dispatched (its finish goes through :meth:`finish`)."""
        return Ticket(rid, client, self.table[worker], 0, peer=True)

    def busy(self, worker: int) -> bool:
        """Has ``worker`` requests in flight (this replica's or its peers')?"""
        return self.policy.queue[worker] > 0

    def evicted(self, worker: int, tokens: bytes, start: int) -> None:
        """``worker``'s cache dropped ``tokens`` (packed) from position ``start`` (a feedback notice)."""
        self.policy.on_evict(worker, tokens, min(start, len(tokens) // WIDTH))

    def loaded(self, worker: int, load: wm.Load) -> None:
        """``worker`` reported its load (a heartbeat's): the policy learns its capacity and service rate."""
        self.policy.on_load(worker, load_of(load))

    def mark_dead(self, worker: int) -> None:
        """``worker``'s server is taken out: route nothing there."""
        self.policy.mark_dead(worker)

    def mark_alive(self, worker: int) -> None:
        """``worker``'s server is taken back."""
        self.policy.mark_alive(worker)

    def expire(self) -> list[str]:
        """Forget the clients without a request in flight for the client TTL."""
        gone = self.clients.expire(self.clock())
        for client in gone:
            self.policy.forget(client)
        self.forgotten += len(gone)
        return gone

    def state(self) -> dict[str, object]:
        """Per worker: server, rank, requests routed here, observed from peers, finished (both) and in
        flight (the policy's queue)."""
        return {"policy": self.policy.name, "model": self.table.model,
                "clients_in_flight": len(self.clients.inflight), "forgotten_clients": self.forgotten,
                "observed_from_peers": sum(self.observed), "budgets": self.budgets.view(self.clock()),
                "workers": [
            {"index": w.index, "server": w.server.url, "rank": w.rank, "routed": self.routed[w.index],
             "observed": self.observed[w.index], "finished": self.finished[w.index],
             "queue": self.policy.queue[w.index]}
            for w in self.table]}
