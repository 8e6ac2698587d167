"""Routing policies, chosen by name: round_robin, shortest_queue, client_rr, cache_aware, preble, d2lpm,
d2lpm_guarded, fair_cache_aware, pab, per_server (a load balancer over servers, each with its own
router: the baseline of the gateway)."""

from __future__ import annotations

from sglang_fair.core.registry import Registry
from sglang_fair.routing.base import (
    NoWorkerError,
    RouterConfig,
    RouteRequest,
    RoutingPolicy,
    least_loaded,
)
from sglang_fair.routing.cache_aware import CacheAware
from sglang_fair.routing.d2lpm import D2LPM
from sglang_fair.routing.d2lpm_guarded import D2LPMGuarded
from sglang_fair.routing.fair_cache_aware import FairCacheAware
from sglang_fair.routing.pab import PrefillBudget
from sglang_fair.routing.per_server import PerServer
from sglang_fair.routing.preble import Preble
from sglang_fair.routing.simple import ClientRoundRobin, RoundRobin, ShortestQueue

ROUTING_POLICIES: Registry[RoutingPolicy] = Registry("routing")
for _cls in (RoundRobin, ShortestQueue, ClientRoundRobin, CacheAware, Preble, D2LPM, D2LPMGuarded,
             FairCacheAware, PrefillBudget, PerServer):
    ROUTING_POLICIES.register(_cls.name)(_cls)


def make_routing_policy(config: RouterConfig) -> RoutingPolicy:
    """Build the routing policy ``config.policy`` (a ConfigError lists the known names)."""
    return ROUTING_POLICIES.create(config.policy, config)


__all__ = [
    "ROUTING_POLICIES",
    "NoWorkerError",
    "RouteRequest",
    "RouterConfig",
    "RoutingPolicy",
    "least_loaded",
    "make_routing_policy",
]
