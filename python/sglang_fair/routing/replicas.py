"""Several router replicas in one process: the model of active-active gateways for the simulator and
the property tests (the gateways themselves share over ZMQ, ``gateway/peers.py``).

A load balancer in front sends the requests to the replicas in turn (round robin, whatever the
client: the worst case for a replica's view of one client). Each replica is a full routing policy
with its own tree, queue sizes and per-client counters. Every replica hears the servers' evictions,
deaths and budgets. With ``share``, each replica's dispatches and finishes reach the others, in order,
once ``lag`` later notices were made (the staleness: ``lag`` ≈ the rate of dispatches and
finishes x the delay); a peer's dispatch is applied with :meth:`RoutingPolicy.observe` (the same
charge, queue size and tree insert as the replica's own). Without it, a replica hears only of its own
requests' finishes, as gateways that do not share.

What sharing keeps (``docs/design/replicas.md``): a replica charges a worker only where its view of the
client's counter is positive, and a refill adds the same to every worker, so the spread of a client's
true charges over the workers stays below Q_c + C + Δ (+ the finish charges at a worker since the
client's last dispatch there, as with one router), Δ the client's charges made by other replicas and
not yet seen (at most ``lag`` notices' worth: a finish is delivered as a dispatch is); a replica's view
of a queue is off by at most the ``lag`` notices it has not seen
(``tests/routing/test_replica_properties.py``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

from sglang_fair.core.global_tree import TokenKey
from sglang_fair.routing.base import RouterConfig, RouteRequest, RoutingPolicy, WorkerLoad

Notice = tuple[int, Callable[[RoutingPolicy], None]]  # (origin replica, what the others apply)


class Replicas(RoutingPolicy):
    """``count`` replicas of ``config.policy``; the wrapper's own ``queue`` is the true queue sizes."""

    name = "replicas"

    def __init__(self, config: RouterConfig, count: int, share: bool = True, lag: int = 0) -> None:
        from sglang_fair.routing import make_routing_policy  # the registry imports routing modules

        super().__init__(config)
        if count < 1 or lag < 0:
            raise ValueError(f"replicas need count >= 1 and lag >= 0, got {count} and {lag}")
        self.replicas = [make_routing_policy(config) for _ in range(count)]
        self.share, self.lag = share, lag
        self.next = 0
        self.pending: deque[Notice] = deque()  # notices not yet delivered to the other replicas
        self.origin: dict[tuple[int, str], deque[int]] = {}  # (worker, client) -> origins in flight

    def choose(self, req: RouteRequest) -> int:
        k = self.next
        self.next = (k + 1) % len(self.replicas)
        worker = self.replicas[k].route(req)
        self.origin.setdefault((worker, req.client), deque()).append(k)
        self._tell(k, lambda peer: peer.observe(req, worker))
        self._deliver(self.lag)
        return worker

    def on_finish(self, worker: int, client: str, output_tokens: int) -> None:
        super().on_finish(worker, client, output_tokens)
        origins = self.origin.get((worker, client))
        k = origins.popleft() if origins else 0
        self.replicas[k].on_finish(worker, client, output_tokens)
        self._tell(k, lambda peer: peer.on_finish(worker, client, output_tokens))
        self._deliver(self.lag)

    def _tell(self, origin: int, apply: Callable[[RoutingPolicy], None]) -> None:
        if self.share and len(self.replicas) > 1:
            self.pending.append((origin, apply))

    def _deliver(self, keep: int) -> None:
        """Apply the oldest notices at every replica but their origin, leaving the newest ``keep``
        in flight."""
        while len(self.pending) > keep:
            origin, apply = self.pending.popleft()
            for k, peer in enumerate(self.replicas):
                if k != origin:
                    apply(peer)

    def flush(self) -> None:
        """Deliver every notice in flight (the replicas' views then agree)."""
        self._deliver(0)

    def counter_view(self) -> dict[str, list[float]]:
        return self.replicas[0].counter_view()

    def hit_estimate(self, worker: int) -> float | None:
        estimates = [r.hit_estimate(worker) for r in self.replicas]
        known = [e for e in estimates if e is not None]
        return sum(known) / len(known) if known else None

    def mark_dead(self, worker: int) -> None:
        super().mark_dead(worker)
        for replica in self.replicas:
            replica.mark_dead(worker)

    def mark_alive(self, worker: int) -> None:
        super().mark_alive(worker)
        for replica in self.replicas:
            replica.mark_alive(worker)

    def on_evict(self, worker: int, tokens: TokenKey, start: int = 0) -> None:
        for replica in self.replicas:
            replica.on_evict(worker, tokens, start)

    def on_prefill_budget(self, worker: int, tokens: float) -> None:
        for replica in self.replicas:
            replica.on_prefill_budget(worker, tokens)

    def on_load(self, worker: int, load: WorkerLoad) -> None:
        super().on_load(worker, load)
        for replica in self.replicas:
            replica.on_load(worker, load)

    def forget(self, client: str) -> None:
        for replica in self.replicas:
            replica.forget(client)

    def set_client_weights(self, weights: Mapping[str, float]) -> None:
        super().set_client_weights(weights)
        for replica in self.replicas:
            replica.set_client_weights(weights)
