"""Hand-built routing requests and policies for the routing tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from sglang_fair.routing import RouterConfig, RoutingPolicy, make_routing_policy


@dataclass
class Q:
    rid: int
    client: str
    tokens: list[int] = field(default_factory=list)


def router(name: str, workers: int = 3, **kw: float) -> RoutingPolicy:
    return make_routing_policy(RouterConfig(policy=name, num_workers=workers, **kw))  # type: ignore[arg-type]
