"""The routing policy over every server's workers: one policy object, one global tree, global indices.

:class:`GatewayRouter` hands the registry's policy (``make_routing_policy``) a request of token ids
and turns the worker it picks into a (server, rank) :class:`Ticket`; the finish of the response
(heard at the HTTP level when the gateway has relayed its last byte) goes back as ``on_finish``.
Evictions and the workers' own finishes are not heard yet (the router process hears them over ZMQ).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
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


class GatewayRouter:
    """The routing policy's host in the gateway (single event loop: no locking)."""

    def __init__(self, policy: RoutingPolicy, table: WorkerTable) -> None:
        if policy.config.num_workers != len(table):
            raise ValueError(f"the policy has {policy.config.num_workers} workers, the table {len(table)}")
        self.policy, self.table = policy, table
        self._ids = itertools.count()
        self.routed = [0] * len(table)
        self.finished = [0] * len(table)

    def route(self, client: str, tokens: Sequence[int]) -> Ticket:
        """Pick a worker for ``client``'s prompt ``tokens`` (raises ``NoWorkerError`` if none is alive)."""
        rid = f"gw-{next(self._ids)}"
        index = self.policy.route(RoutedPrompt(rid, client, pack_tokens(tokens)))
        self.routed[index] += 1
        return Ticket(rid, client, self.table[index], len(tokens))

    def finish(self, ticket: Ticket, output_tokens: int) -> None:
        """The response of ``ticket`` ended (completed, failed or cut) after ``output_tokens``."""
        self.finished[ticket.worker.index] += 1
        self.policy.on_finish(ticket.worker.index, ticket.client, max(0, output_tokens))

    def state(self) -> dict[str, object]:
        """Per worker: server, rank, requests routed, finished and in flight (the policy's queue)."""
        return {"policy": self.policy.name, "model": self.table.model, "workers": [
            {"index": w.index, "server": w.server.url, "rank": w.rank, "routed": self.routed[w.index],
             "finished": self.finished[w.index], "queue": self.policy.queue[w.index]}
            for w in self.table]}
