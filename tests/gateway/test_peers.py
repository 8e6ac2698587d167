"""Gateway replicas sharing their dispatches: the peer book on hand-built notices, then real replicas
linked over ZMQ on loopback in one event loop (a dispatch at one is observed at the other, finishes
too, a dead peer's requests are released, a late replica is replayed what is in flight, a replica
that numbers the workers otherwise is not heard), and the flags' refusals."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.gateway import peer_msgs as pm
from sglang_fair.gateway.peers import PeerBook, PeerConfig, PeerLink, run_link
from sglang_fair.gateway.replication import Replication, table_fingerprint
from sglang_fair.gateway.routing import GatewayRouter, RoutedPrompt
from sglang_fair.gateway.servers import ServerInfo, WorkerTable
from sglang_fair.harness.server import free_port
from sglang_fair.routing import RouterConfig, make_routing_policy

pytestmark = pytest.mark.timers

TABLE = WorkerTable([ServerInfo("http://a:1", "tiny", 2), ServerInfo("http://b:1", "tiny", 2)])
FP = table_fingerprint(TABLE)
PROMPT = list(range(100, 164))


def alive(run: str, seq: int, heard: tuple[str, ...] = (), table: str = FP) -> pm.Alive:
    return pm.Alive(run, seq, f"name-{run}", table, heard)


def test_the_book_applies_a_known_peers_notices_once_and_releases_a_silent_peers() -> None:
    book = PeerBook("me", FP, timeout=5.0)
    early = pm.Dispatched("p", 1, "r0", "alice", 1, b"")
    assert book.heard(early, 0.0) is None  # no Alive yet: its worker numbering is unknown
    peer = book.heard(alive("p", 2), 0.1)
    assert peer is not None and book.hearing() == ["p"] and not book.alive(peer, alive("p", 2))
    for seq, newly in ((3, True), (4, False)):  # it hears this replica (once: then a replay is due)
        note = alive("p", seq, ("me",))
        assert book.heard(note, 0.1) is peer and book.alive(peer, note) == newly
    first = pm.Dispatched("p", 5, "r1", "alice", 3, b"")
    assert book.heard(first, 0.2) is peer and book.dispatched(peer, first)
    replay = pm.Dispatched("p", 6, "r1", "alice", 3, b"", replay=True)
    assert book.heard(replay, 0.2) is peer and not book.dispatched(peer, replay)
    assert book.counts["duplicates"] == 1
    assert book.heard(pm.Dispatched("p", 9, "r2", "bob", 0, b""), 0.3) is peer and peer.gaps == 2
    book.dispatched(peer, pm.Dispatched("p", 9, "r2", "bob", 0, b""))
    assert book.finished(peer, pm.Finished("p", 10, "r1", 7)) == (3, "alice")
    assert book.finished(peer, pm.Finished("p", 11, "r-unknown", 7)) is None
    assert book.heard(alive("me", 1), 0.4) is None  # its own notices
    assert list(book.expire(5.2)) == [] and list(book.expire(5.31)) == [(0, "bob")]
    assert book.runs == {} and book.counts["released"] == 1


def test_a_peer_with_other_workers_is_not_heard() -> None:
    book = PeerBook("me", FP, timeout=5.0)
    assert book.heard(alive("p", 1, table="other"), 0.0) is None
    assert book.heard(pm.Dispatched("p", 2, "r", "alice", 0, b""), 0.1) is None
    assert book.hearing() == [] and book.counts["ignored"] == 2


def test_bad_frames_are_refused_with_a_reason() -> None:
    with pytest.raises(pm.MessageError, match="version"):
        pm.decode_notice(pm.encode(pm.Alive("p", 1, "n", FP, v=99)))
    with pytest.raises(pm.MessageError, match="whole"):
        pm.decode_notice(pm.encode(pm.Dispatched("p", 1, "r", "c", 0, b"\x00\x01\x02")))
    with pytest.raises(pm.MessageError, match="malformed"):
        pm.decode_notice(b"\x93junk")


@pytest.mark.parametrize(("flags", "message"), [
    ({"addresses": "b:1"}, "needs --peer-port"),
    ({"port": 5, "addresses": "nohost"}, "is not"),
    ({"port": 5, "interval": 2.0, "timeout": 1.0}, "--peer-interval"),
])
def test_bad_peer_flags_are_refused(flags: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PeerConfig(**flags)  # type: ignore[arg-type]


class Replica:
    """A gateway's router and replica link, without HTTP."""

    def __init__(self, port: int, peers: list[int], table: WorkerTable = TABLE, interval: float = 0.05,
                 timeout: float = 0.6) -> None:
        config = PeerConfig(port=port, addresses=",".join(f"127.0.0.1:{p}" for p in peers),
                            interval=interval, timeout=timeout)
        policy = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=len(table)))
        link = PeerLink(config, f"replica-{port}", table_fingerprint(table), None, lambda _: b"")
        self.router = GatewayRouter(policy, table, peers=link)
        self.replication = Replication(link, self.router)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(run_link(self.replication.link, self.replication.on_notice,
                                                 self.replication.tick))

    async def stop(self) -> None:
        """Stop its link (idempotent; a test that failed half-way must not leave live sockets behind)."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None
        if not self.replication.link.context.closed:
            self.replication.link.close()


@asynccontextmanager
async def running(*replicas: Replica) -> AsyncIterator[None]:
    """Start ``replicas``; stop every one however the block ends."""
    try:
        for replica in replicas:
            replica.start()
        yield
    finally:
        for replica in replicas:
            await replica.stop()


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not within the timeout")


def test_two_replicas_share_dispatches_and_finishes_and_release_a_dead_ones() -> None:
    async def scenario() -> None:
        pa, pb, pc = free_port(), free_port(), free_port()
        a, b = Replica(pa, [pb, pc]), Replica(pb, [pa, pc])
        c = Replica(pc, [pa, pb])  # a late replica: started below, what is in flight is replayed to it
        async with running(a, b):
            try:
                await until(lambda: a.replication.book.hearing() and b.replication.book.hearing() != [])
                ticket = a.router.route("alice", PROMPT)
                w = ticket.worker.index
                await until(lambda: b.router.policy.queue[w] == 1)
                assert b.router.policy.held(_probe(PROMPT))[w] == len(PROMPT)  # b's tree has a's dispatch
                qa, qb = a.router.policy.counter_view()["alice"], b.router.policy.counter_view()["alice"]
                assert len({x - y for x, y in zip(qa, qb, strict=True)}) == 1  # same charges; refills differ
                assert b.router.route("alice", PROMPT).worker.index == w  # and b routes the prefix there

                c.start()
                await until(lambda: c.router.policy.queue[w] == 2)
                a.router.finish(ticket, 5)
                await until(lambda: b.router.policy.queue[w] == 1 and c.router.policy.queue[w] == 1)

                a.router.route("bob", [7] * 40)
                await until(lambda: sum(b.router.policy.queue) == 2)
                await a.stop()  # a dies with bob's request in flight: b and c release it after the timeout
                await until(lambda: sum(b.router.policy.queue) == 1 and sum(c.router.policy.queue) == 1)
                assert b.replication.book.counts["released"] == 1
                for replica in (b, c):  # every finish, a peer's and a released one too, went through it
                    router = replica.router
                    assert [r + o - f for r, o, f in zip(router.routed, router.observed, router.finished,
                                                           strict=True)] == router.policy.queue
                    assert sum(router.observed) >= 2 and sum(router.finished) >= 2
            finally:
                await c.stop()

    asyncio.run(scenario())


def test_a_replica_that_stood_still_does_not_release_what_its_live_peer_has_in_flight() -> None:
    """b did not run for a while (its clock jumps past the peer timeout): at its first look its peer
    seems silent, but the silence is b's own (``OwnPause``): nothing is released, and the peer's queued
    notices are heard before the next look. Control: the same look without the pause check releases
    bob's. b ticks only when the test says (its own interval is longer than the test), so no look of its
    loop can come between the jump and the peer's next notice."""
    async def scenario() -> None:
        pa, pb = free_port(), free_port()
        a, b = Replica(pa, [pb]), Replica(pb, [pa], interval=30.0, timeout=60.0)
        async with running(a, b):
            await until(lambda: b.replication.book.hearing() != [])  # b applies a's notices
            a.router.route("bob", [7] * 40)
            await until(lambda: sum(b.router.policy.queue) == 1)
            b.replication.clock = lambda: time.monotonic() + 100.0
            b.replication.tick()  # no await since the jump: no notice of a's can have come in between
            assert sum(b.router.policy.queue) == 1 and b.replication.book.counts["released"] == 0
            await until(lambda: b.replication.book.runs[a.replication.link.run].seen > time.monotonic() + 50)
            b.replication.tick()  # a's notices were heard on b's new clock: a is not silent
            assert sum(b.router.policy.queue) == 1 and b.replication.book.counts["released"] == 0
            b.replication.clock = lambda: time.monotonic() + 200.0
            b.replication.pause.limit = math.inf  # the control: b's look without the pause check
            b.replication.tick()
            assert sum(b.router.policy.queue) == 0 and b.replication.book.counts["released"] == 1

    asyncio.run(scenario())


def test_the_router_announces_on_the_link_it_was_built_with() -> None:
    """The replication does not rewire a router: one built without the link is refused."""
    link = PeerLink(PeerConfig(port=free_port()), "r", table_fingerprint(TABLE), None, lambda _: b"")
    try:
        policy = make_routing_policy(RouterConfig(policy="round_robin", num_workers=len(TABLE)))
        with pytest.raises(ValueError, match="peers=link"):
            Replication(link, GatewayRouter(policy, TABLE))
        Replication(link, GatewayRouter(policy, TABLE, peers=link))
    finally:
        link.close()


def test_a_replica_numbering_the_workers_otherwise_is_not_heard() -> None:
    async def scenario() -> None:
        pa, pb = free_port(), free_port()
        other = WorkerTable([ServerInfo("http://b:1", "tiny", 2), ServerInfo("http://a:1", "tiny", 2)])
        a, b = Replica(pa, [pb]), Replica(pb, [pa], other)
        async with running(a, b):
            await until(lambda: b.replication.book.counts["ignored"] > 2)
            a.router.route("alice", PROMPT)
            await asyncio.sleep(0.3)
            assert sum(b.router.policy.queue) == 0 and b.replication.book.hearing() == []

    asyncio.run(scenario())


def _probe(tokens: list[int]) -> RoutedPrompt:
    return RoutedPrompt("probe", "x", pack_tokens(tokens))
