"""Cache-oblivious baselines: round robin, shortest queue, per-client round robin."""

from __future__ import annotations

from collections import defaultdict

from sglang_fair.routing.base import RouterConfig, RouteRequest, RoutingPolicy, least_loaded


class RoundRobin(RoutingPolicy):
    """Workers in turn, whatever the request (SGLang's default data-parallel dispatch)."""

    name = "round_robin"

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        self.next = 0

    def choose(self, req: RouteRequest) -> int:
        worker = self.alive[self.next % len(self.alive)]
        self.next = (self.next + 1) % len(self.alive)
        return worker


class ShortestQueue(RoutingPolicy):
    """The worker with the fewest unfinished requests."""

    name = "shortest_queue"

    def choose(self, req: RouteRequest) -> int:
        return least_loaded(self.alive, self.queue)


class ClientRoundRobin(RoutingPolicy):
    """Each client's requests go to the workers in turn: the distributed VTC baseline ([1] §6.1)."""

    name = "client_rr"

    def __init__(self, config: RouterConfig) -> None:
        super().__init__(config)
        self.next: defaultdict[str, int] = defaultdict(int)

    def forget(self, client: str) -> None:
        self.next.pop(client, None)

    def choose(self, req: RouteRequest) -> int:
        turn = self.next[req.client] % len(self.alive)
        self.next[req.client] = (turn + 1) % len(self.alive)
        return self.alive[turn]
