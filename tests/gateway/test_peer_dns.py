"""Peers found by name (``peer_dns``): one entry of ``--peer-addresses`` that resolves to several
addresses (a Kubernetes headless Service) is every replica behind it. Replicas on three loopback
addresses share one port, as pods behind a Service do, and find each other through one name; a
replica whose address leaves the name is disconnected. Negative control: without re-resolution
(the name resolved once, before the third replica's address is in it) the third is never heard."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from test_peers import PROMPT, TABLE, until

from sglang_fair.gateway import peer_dns
from sglang_fair.gateway.peer_dns import PeerEndpoints, resolve
from sglang_fair.gateway.peers import PeerConfig, PeerLink
from sglang_fair.gateway.replication import Replication, table_fingerprint
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.harness.server import free_port
from sglang_fair.routing import RouterConfig, make_routing_policy

pytestmark = pytest.mark.timers  # the peer link keeps timers (resolving again, a silent peer's expiry)
HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


class FakeSocket:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def connect(self, endpoint: str) -> None:
        self.calls.append(("connect", endpoint))

    def disconnect(self, endpoint: str) -> None:
        self.calls.append(("disconnect", endpoint))

    def setsockopt(self, option: int, value: int) -> None:
        self.calls.append(("option", str(option)))


def test_endpoints_follow_the_addresses() -> None:
    sock = FakeSocket()
    entry = PeerEndpoints(sock, "gateway-peers.llm.svc:30090")
    entry.update(["10.0.0.1", "10.0.0.2"])
    entry.update(["10.0.0.2", "10.0.0.3"])
    entry.update(["10.0.0.2", "10.0.0.3"])
    assert sock.calls == [("connect", "tcp://10.0.0.1:30090"), ("connect", "tcp://10.0.0.2:30090"),
                          ("connect", "tcp://10.0.0.3:30090"), ("disconnect", "tcp://10.0.0.1:30090")]


def test_names_resolve_to_ipv4_first() -> None:
    assert asyncio.run(resolve("127.0.0.1", 1)) == ["127.0.0.1"]
    assert asyncio.run(resolve("localhost", 1)) == ["127.0.0.1"]
    assert asyncio.run(resolve("[::1]", 1)) == ["[::1]"]


def test_a_failed_resolution_keeps_the_connections() -> None:
    sock = FakeSocket()
    entry = PeerEndpoints(sock, "peers:1")
    answers = iter([["10.0.0.1"], OSError("no DNS"), ["10.0.0.1"]])

    async def resolver(host: str, port: int) -> list[str]:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def scenario() -> None:
        task = asyncio.create_task(entry.follow(resolver, every=0.01))
        await asyncio.sleep(0.1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopIteration, RuntimeError):
            await task

    asyncio.run(scenario())
    assert sock.calls == [("connect", "tcp://10.0.0.1:1")]


class NamedReplica:
    """A replica bound to ``host``:``port`` whose only peer entry is the name ``gateways``."""

    def __init__(self, host: str, port: int) -> None:
        config = PeerConfig(port=port, host=host, addresses=f"gateways:{port}", interval=0.05, timeout=0.6)
        policy = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=len(TABLE)))
        link = PeerLink(config, host, table_fingerprint(TABLE), None, lambda _: b"")
        self.router = GatewayRouter(policy, TABLE, peers=link)
        self.replication = Replication(link, self.router)
        self.task = asyncio.create_task(self.replication.run())

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.replication.link.close()


@pytest.mark.parametrize("re_resolve", [True, False])
def test_replicas_behind_one_name_hear_each_other(monkeypatch: pytest.MonkeyPatch, re_resolve: bool) -> None:
    behind = list(HOSTS[:2])  # the Service's addresses now: the third replica is not up yet
    resolved: dict[str, list[str]] = {}

    async def fake_resolve(host: str, port: int) -> list[str]:
        assert host == "gateways"
        if not re_resolve:  # the negative control: each replica resolves the name once
            return resolved.setdefault(str(asyncio.current_task()), list(behind))
        return list(behind)

    monkeypatch.setattr(peer_dns, "RESOLVE_EVERY_S", 0.05)
    monkeypatch.setattr(peer_dns, "resolve", fake_resolve)

    async def scenario() -> bool:
        port = free_port()
        a, b = NamedReplica(HOSTS[0], port), NamedReplica(HOSTS[1], port)
        await until(lambda: a.replication.book.hearing() != [] and b.replication.book.hearing() != [])
        c = NamedReplica(HOSTS[2], port)
        behind.append(HOSTS[2])
        ticket = c.router.route("alice", PROMPT)
        try:
            await until(lambda: a.router.policy.queue[ticket.worker.index] == 1, timeout=2.0)
            heard = True
        except AssertionError:
            heard = False
        for replica in (a, b, c):
            await replica.stop()
        return heard

    assert asyncio.run(scenario()) is re_resolve
