"""A plain load balancer over servers, each server routing over its own workers: the deployment the
gateway replaces.

The workers are numbered server by server, ``server_workers`` to a server (``num_workers`` must be a
multiple of it), as the gateway numbers them. For a request, the outer balancer picks a server of those with a
live worker (``server_balancer``: ``round_robin``, the servers in turn whatever the request, or
``client_hash``, a stable hash of the client name, so a client always lands on the same server while
the servers it hashes to live); that server's own router, a ``server_policy`` policy of the registry
over that server's workers only (default ``fair_cache_aware``, what ``serve --dp-size N`` runs), picks
the worker. Each inner router keeps its own queues, tree and per-client counters and hears only of its
own workers' finishes and evictions: fairness and locality per server. With one server
(``server_workers`` 0 or ``num_workers``) it routes exactly as ``server_policy`` does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace

from sglang_fair.core.errors import require
from sglang_fair.core.global_tree import TokenKey
from sglang_fair.routing.base import NoWorkerError, RouterConfig, RouteRequest, RoutingPolicy, WorkerLoad


def client_hash(client: str) -> int:
    """A hash of ``client`` that is the same in every process (Python's ``hash`` of a str is salted;
    CRC-32 is affine, so names that differ in one character, c0..c3, all came out odd)."""
    return int.from_bytes(hashlib.blake2b(client.encode(), digest_size=8).digest(), "big")


class PerServer(RoutingPolicy):
    name = "per_server"

    def __init__(self, config: RouterConfig) -> None:
        from sglang_fair.routing import make_routing_policy  # the registry imports this module

        super().__init__(config)
        size = config.server_workers or config.num_workers
        require(config.num_workers % size == 0,
                f"per_server: {config.num_workers} workers are not servers of {size} "
                "(--router-server-workers must divide the worker count)")
        require(config.server_policy != self.name, "per_server: --router-server-policy cannot be per_server")
        self.size = size
        inner = replace(config, policy=config.server_policy, num_workers=size)
        self.servers = [make_routing_policy(inner) for _ in range(config.num_workers // size)]
        self.next = 0  # round robin's turn, over the live servers

    def place(self, worker: int) -> tuple[RoutingPolicy, int]:
        """The server's router that owns global ``worker``, and the worker's index there."""
        return self.servers[worker // self.size], worker % self.size

    def choose(self, req: RouteRequest) -> int:
        live = [s for s, server in enumerate(self.servers) if server.alive]
        if self.config.server_balancer == "client_hash":
            pick = live[client_hash(req.client) % len(live)]
        else:
            pick = live[self.next % len(live)]
            self.next = (self.next + 1) % len(live)
        return pick * self.size + self.servers[pick].route(req)

    def observe(self, req: RouteRequest, worker: int) -> None:
        """A peer's dispatch (:meth:`route` records its own through the server's router)."""
        super().observe(req, worker)
        server, local = self.place(worker)
        server.observe(req, local)

    def route(self, req: RouteRequest) -> int:
        if not self.alive:
            raise NoWorkerError("no live worker to route to")
        worker = self.choose(req)  # the server's router recorded it
        super().observe(req, worker)
        return worker

    def hit_estimate(self, worker: int) -> float | None:
        server, local = self.place(worker)
        return server.hit_estimate(local)

    def counter_view(self) -> dict[str, list[float]]:
        """Each server's counters side by side (zeros where a server never saw the client)."""
        views = [server.counter_view() for server in self.servers]
        clients = sorted({c for view in views for c in view})
        return {c: [x for view in views for x in view.get(c, [0.0] * self.size)] for c in clients}

    def mark_dead(self, worker: int) -> None:
        super().mark_dead(worker)
        server, local = self.place(worker)
        server.mark_dead(local)

    def mark_alive(self, worker: int) -> None:
        super().mark_alive(worker)
        server, local = self.place(worker)
        server.mark_alive(local)

    def on_finish(self, worker: int, client: str, output_tokens: int) -> None:
        super().on_finish(worker, client, output_tokens)
        server, local = self.place(worker)
        server.on_finish(local, client, output_tokens)

    def on_evict(self, worker: int, tokens: TokenKey, start: int = 0) -> None:
        server, local = self.place(worker)
        server.on_evict(local, tokens, start)

    def on_prefill_budget(self, worker: int, tokens: float) -> None:
        server, local = self.place(worker)
        server.on_prefill_budget(local, tokens)

    def on_load(self, worker: int, load: WorkerLoad) -> None:
        super().on_load(worker, load)
        server, local = self.place(worker)
        server.on_load(local, load)

    def forget(self, client: str) -> None:
        for server in self.servers:
            server.forget(client)

    def set_client_weights(self, weights: Mapping[str, float]) -> None:
        super().set_client_weights(weights)
        for server in self.servers:
            server.set_client_weights(weights)
