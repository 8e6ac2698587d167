"""per_server: a load balancer over servers, each with its own router, on hand-built inputs."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.routing import RouterConfig, RoutingPolicy, make_routing_policy
from sglang_fair.routing.per_server import PerServer, client_hash


@dataclass
class Q:
    rid: int
    client: str
    tokens: list[int] = field(default_factory=list)


def per_server(workers: int = 4, size: int = 2, balancer: str = "round_robin", **kw: object) -> PerServer:
    policy = make_routing_policy(RouterConfig(policy="per_server", num_workers=workers, server_workers=size,
                                              server_balancer=balancer, **kw))  # type: ignore[arg-type]
    assert isinstance(policy, PerServer)
    return policy


def test_round_robin_takes_servers_in_turn_and_routes_only_inside_the_chosen_one() -> None:
    ps = per_server(workers=6, size=2)
    doc = list(range(200))
    got = [ps.route(Q(i, "a", doc + [1000 + i])) for i in range(6)]
    assert [w // 2 for w in got] == [0, 1, 2, 0, 1, 2]  # the balancer ignores where the document is cached
    # inside a server, fair_cache_aware keeps the document on the worker that holds it
    assert got[3] == got[0] and got[4] == got[1] and got[5] == got[2]
    assert [s.queue for s in ps.servers] == [[2, 0], [2, 0], [2, 0]]
    assert ps.queue == [2, 0, 2, 0, 2, 0]
    # a global cache-aware router keeps the whole document on one worker instead
    ca = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=6, worker_capacity=256))
    assert {ca.route(Q(i, "a", doc + [1000 + i])) for i in range(6)} == {0}


def test_client_hash_keeps_each_client_on_its_server() -> None:
    ps = per_server(workers=8, size=2, balancer="client_hash")
    for i, client in enumerate(["c0", "c1", "c2", "c3"] * 3):
        worker = ps.route(Q(i, client, [i]))
        assert worker // 2 == client_hash(client) % 4
    assert client_hash("c0") == 8833844021317457471  # BLAKE2b: the same in every process


def test_feedback_reaches_the_owning_server_at_its_own_index() -> None:
    ps = per_server(workers=4, size=2)
    assert ps.route(Q(0, "a", [1, 2, 3])) == 0
    assert ps.route(Q(1, "b", [4, 5, 6])) == 2
    ps.on_finish(2, "b", 10)
    assert ps.servers[1].queue == [0, 0] and ps.servers[0].queue == [1, 0] and ps.queue == [1, 0, 0, 0]
    ps.on_evict(0, [1, 2, 3])
    assert ps.servers[0].tree.match_lengths([1, 2, 3]) == {}
    assert set(ps.counter_view()) == {"a", "b"} and len(ps.counter_view()["a"]) == 4


def test_a_server_with_no_live_worker_gets_nothing() -> None:
    ps = per_server(workers=4, size=2)
    ps.mark_dead(0)
    ps.mark_dead(1)
    assert {ps.route(Q(i, "a", [i])) // 2 for i in range(4)} == {1}
    ps.mark_alive(1)
    assert {ps.route(Q(i, "a", [i])) for i in range(4, 8)} >= {1}


def _replay(policy: RoutingPolicy, seed: int) -> list[int]:
    rng, out, inflight = random.Random(seed), [], []
    docs = [[rng.randrange(1000) for _ in range(rng.randrange(20, 200))] for _ in range(6)]
    for rid in range(300):
        client = rng.choice("abcd")
        worker = policy.route(Q(rid, client, rng.choice(docs) + [rng.randrange(1000) for _ in range(8)]))
        out.append(worker)
        inflight.append((worker, client))
        if rng.random() < 0.6:
            done = inflight.pop(rng.randrange(len(inflight)))
            policy.on_finish(*done, rng.randrange(1, 300))
    return out


@pytest.mark.parametrize("size", [0, 4])
def test_one_server_routes_exactly_as_its_policy(size: int) -> None:
    for seed in range(3):
        inner = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=4, quantum=500))
        assert _replay(per_server(workers=4, size=size, quantum=500), seed) == _replay(inner, seed)


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(ConfigError, match="divide"):
        per_server(workers=6, size=4)
    with pytest.raises(ConfigError, match="cannot be per_server"):
        per_server(server_policy="per_server")
    with pytest.raises(ConfigError, match="unknown routing policy"):
        per_server(server_policy="nope")
    with pytest.raises(ConfigError, match="server_balancer"):
        RouterConfig(server_balancer="random")
