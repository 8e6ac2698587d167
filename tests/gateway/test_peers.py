"""Gateway replicas sharing their dispatches: the peer book on hand-built notices, then real replicas
linked over ZMQ on loopback in one event loop (a dispatch at one is observed at the other, finishes
too, a dead peer's requests are released, a late replica is replayed what is in flight, a replica
that numbers the workers otherwise is not heard), and the flags' refusals."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

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

    def __init__(self, port: int, peers: list[int], table: WorkerTable = TABLE) -> None:
        config = PeerConfig(port=port, addresses=",".join(f"127.0.0.1:{p}" for p in peers),
                            interval=0.05, timeout=0.6)
        policy = make_routing_policy(RouterConfig(policy="fair_cache_aware", num_workers=len(table)))
        self.router = GatewayRouter(policy, table)
        link = PeerLink(config, f"replica-{port}", table_fingerprint(table), None, lambda _: b"")
        self.replication = Replication(link, self.router)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(run_link(self.replication.link, self.replication.on_notice,
                                                 self.replication.tick))

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        self.replication.link.close()


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
        a.start(), b.start()
        await until(lambda: a.replication.book.hearing() and b.replication.book.hearing() != [])
        ticket = a.router.route("alice", PROMPT)
        w = ticket.worker.index
        await until(lambda: b.router.policy.queue[w] == 1)
        assert b.router.policy.held(_probe(PROMPT))[w] == len(PROMPT)  # b's tree has a's dispatch
        qa, qb = a.router.policy.counter_view()["alice"], b.router.policy.counter_view()["alice"]
        assert len({x - y for x, y in zip(qa, qb, strict=True)}) == 1  # the same charges; refills differ
        assert b.router.route("alice", PROMPT).worker.index == w  # and b routes the prefix there

        c = Replica(pc, [pa, pb])  # a late replica: what is in flight is replayed to it
        c.start()
        await until(lambda: c.router.policy.queue[w] == 2)
        a.router.finish(ticket, 5)
        await until(lambda: b.router.policy.queue[w] == 1 and c.router.policy.queue[w] == 1)

        a.router.route("bob", [7] * 40)
        await until(lambda: sum(b.router.policy.queue) == 2)
        await a.stop()  # a dies with bob's request in flight: b and c release it after the timeout
        await until(lambda: sum(b.router.policy.queue) == 1 and sum(c.router.policy.queue) == 1)
        assert b.replication.book.counts["released"] == 1
        await b.stop(), await c.stop()

    asyncio.run(scenario())


def test_a_replica_that_stood_still_does_not_release_what_its_live_peer_has_in_flight() -> None:
    """b did not run for 5 s (its clock jumps): at its first look its peer seems silent for 5 s, but
    the silence is b's own (``OwnPause``): nothing is released, and the peer's queued notices are
    heard before the next look. Control: the same look without the pause check releases bob's."""
    async def scenario() -> None:
        pa, pb = free_port(), free_port()
        a, b = Replica(pa, [pb]), Replica(pb, [pa])
        a.start(), b.start()
        await until(lambda: a.replication.book.hearing() != [] and b.replication.book.hearing() != [])
        a.router.route("bob", [7] * 40)
        await until(lambda: sum(b.router.policy.queue) == 1)
        b.replication.clock = lambda: time.monotonic() + 5.0
        b.replication.tick()  # no await since the jump: no notice of a's can have come in between
        assert sum(b.router.policy.queue) == 1 and b.replication.book.counts["released"] == 0
        await asyncio.sleep(0.3)  # a's notices, heard on b's new clock
        assert sum(b.router.policy.queue) == 1 and b.replication.book.counts["released"] == 0
        b.replication.clock = lambda: time.monotonic() + 10.0
        b.replication.pause.limit = math.inf  # the control: b's look without the pause check
        b.replication.tick()
        assert sum(b.router.policy.queue) == 0 and b.replication.book.counts["released"] == 1
        await a.stop(), await b.stop()

    asyncio.run(scenario())


def test_a_replica_numbering_the_workers_otherwise_is_not_heard() -> None:
    async def scenario() -> None:
        pa, pb = free_port(), free_port()
        other = WorkerTable([ServerInfo("http://b:1", "tiny", 2), ServerInfo("http://a:1", "tiny", 2)])
        a, b = Replica(pa, [pb]), Replica(pb, [pa], other)
        a.start(), b.start()
        await until(lambda: b.replication.book.counts["ignored"] > 2)
        a.router.route("alice", PROMPT)
        await asyncio.sleep(0.3)
        assert sum(b.router.policy.queue) == 0 and b.replication.book.hearing() == []
        await a.stop(), await b.stop()

    asyncio.run(scenario())


def _probe(tokens: list[int]) -> RoutedPrompt:
    return RoutedPrompt("probe", "x", pack_tokens(tokens))
