"""Gateway replicas that share what they route: active-active gateways with one view of the workers.

Each gateway started with ``--peer-port`` publishes its own notices (``peer_msgs``: every dispatch,
every finish, and ``Alive`` every ``--peer-interval``) on one ZMQ PUB socket, and subscribes to the
peers of ``--peer-addresses``. A peer's dispatch is recorded by the policy as its own
(``RoutingPolicy.observe``: the client's charge, the queue size, the global tree) and its finish as
``on_finish``, so the replicas' per-(client, worker) counters, queue sizes and trees converge within
the link's delay. Every replica hears the servers' feedback itself (``feedback.py``).

:class:`PeerBook` (pure, time passed in) keeps, per peer run, the requests it has in flight: a run
silent for ``--peer-timeout`` (its process died; the servers abort what it relayed when its
connections drop) has them released, so nothing it dispatched stays counted. A replica that starts
late hears the others' requests in flight again: each replica re-sends its own (``replay``) once a
new run says it hears it. Over other than loopback the link is CurveZMQ with ``--feedback-keys``:
a replica admits the gateways whose ``gateway*.key`` it holds and trusts each peer's own key
(``NAME@HOST:PORT``). The processes of one ``gateway --workers N`` are each other's peers over
``ipc://`` endpoints in their private directory (:class:`Siblings`, no keys: the directory's mode
admits only its owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import zmq
import zmq.asyncio

from sglang_fair.core.errors import require
from sglang_fair.gateway import peer_msgs as pm
from sglang_fair.gateway.peer_dns import PeerEndpoints
from sglang_fair.links.curve import CurveKeys
from sglang_fair.links.sockets import publisher, subscriber

logger = logging.getLogger("sglang_fair.gateway")
Released = tuple[int, str]  # (worker, client) of a request in flight that a dead run dispatched


@dataclass(frozen=True)
class PeerConfig:
    """The gateway's ``--peer-...`` flags: its replica link."""

    flag_prefix: ClassVar[str] = "peer_"
    port: int = field(default=0, metadata={
        "help": "TCP port publishing this gateway's dispatches and finishes to its peer replicas (0: off)"})
    host: str = field(default="127.0.0.1", metadata={
        "help": "address the peer port binds to; other than loopback needs --feedback-keys"})
    addresses: str = field(default="", metadata={
        "help": "the other replicas' peer ports, comma-separated HOST:PORT (with --feedback-keys "
                "KEYNAME@HOST:PORT, KEYNAME the peer's gateway key pair); a HOST that resolves to several "
                "addresses (a headless Service) is every one of them, resolved again every 5 s"})
    name: str = field(default="", metadata={"help": "this replica's name in views (default: host:port)"})
    interval: float = field(default=0.5, metadata={"help": "seconds between this replica's Alive notices"})
    timeout: float = field(default=5.0, metadata={
        "help": "seconds a peer may stay silent before its requests in flight are released"})

    def __post_init__(self) -> None:
        require(0 <= self.port < 65536, f"--peer-port must be in 0..65535, got {self.port}")
        require(self.interval > 0 and self.timeout > self.interval,
                "--peer-interval must be > 0 and below --peer-timeout")
        require(not self.peers() or self.port > 0,
                "--peer-addresses needs --peer-port (the peers hear each other)")
        for _key, address in self.peers():
            host, _, port = address.rpartition(":")
            require(bool(host) and port.isdigit() and 0 < int(port) < 65536,
                    f"--peer-addresses: {address!r} is not [KEYNAME@]HOST:PORT")

    def peers(self) -> list[tuple[str, str]]:
        """(key name or "", HOST:PORT) of every peer."""
        out = []
        for item in (a.strip() for a in self.addresses.split(",")):
            if item:
                key, _, address = item.rpartition("@")
                out.append((key, address))
        return out


@dataclass
class PeerRun:
    """One peer process as heard: its name, when last heard, the sequence, its requests in flight."""

    name: str
    seen: float
    seq: int = -1
    gaps: int = 0  # notices missed (sequence numbers skipped)
    inflight: dict[str, Released] = field(default_factory=dict)  # rid -> (worker, client)
    agrees: bool | None = None  # its worker table is this replica's (None: no Alive heard yet)
    hears_me: bool = False


class PeerBook:
    """What this replica (run ``run``, worker table ``table``) knows of its peers' runs; tells the
    host what to apply. A run's dispatches and finishes count only once its Alive showed the same
    worker table."""

    def __init__(self, run: str, table: str, timeout: float) -> None:
        self.run, self.table, self.timeout = run, table, timeout
        self.runs: dict[str, PeerRun] = {}
        self.counts = {"dispatched": 0, "finished": 0, "replayed": 0, "duplicates": 0, "released": 0,
                       "ignored": 0, "replays_sent": 0}

    def heard(self, msg: pm.Notice, now: float) -> PeerRun | None:
        """Book ``msg``'s arrival; its run, if the host should apply it (not this replica's own, not a
        run whose worker table differs or is not known yet)."""
        if msg.run == self.run:
            return None
        peer = self.runs.get(msg.run)
        if peer is None:
            peer = self.runs[msg.run] = PeerRun(msg.name if isinstance(msg, pm.Alive) else msg.run, now)
        if peer.seq >= 0 and msg.seq > peer.seq + 1:
            peer.gaps += msg.seq - peer.seq - 1
        peer.seq, peer.seen = max(peer.seq, msg.seq), now
        if isinstance(msg, pm.Alive):
            if peer.agrees is None and msg.table != self.table:
                logger.error("gateway: peer %s numbers the workers otherwise (other --worker-urls or "
                             "order): not heard", msg.name)
            peer.agrees = msg.table == self.table
        if not peer.agrees:
            self.counts["ignored"] += 1
            return None
        return peer

    def hearing(self) -> list[str]:
        """The runs whose notices this replica applies (its Alive names them)."""
        return [run for run, peer in self.runs.items() if peer.agrees]

    def dispatched(self, peer: PeerRun, msg: pm.Dispatched) -> bool:
        """Whether the host should record ``msg`` (False: a replay of one it holds)."""
        if msg.rid in peer.inflight:
            self.counts["duplicates"] += 1
            return False
        peer.inflight[msg.rid] = (msg.worker, msg.client)
        self.counts["replayed" if msg.replay else "dispatched"] += 1
        return True

    def finished(self, peer: PeerRun, msg: pm.Finished) -> Released | None:
        """The (worker, client) whose request ended (None: one this replica never heard of)."""
        done = peer.inflight.pop(msg.rid, None)
        self.counts["finished"] += done is not None
        return done

    def alive(self, peer: PeerRun, msg: pm.Alive) -> bool:
        """Whether the peer now hears this replica for the first time (the host replays to it)."""
        peer.name = msg.name
        newly = self.run in msg.heard and not peer.hears_me
        peer.hears_me = peer.hears_me or newly
        return newly

    def expire(self, now: float) -> Iterator[Released]:
        """Forget the runs silent for ``timeout`` s; their requests in flight, to release."""
        for run, peer in list(self.runs.items()):
            if now - peer.seen > self.timeout:
                del self.runs[run]
                logger.warning("gateway: peer %s silent for %.1f s: releasing its %d requests in flight",
                               peer.name, now - peer.seen, len(peer.inflight))
                self.counts["released"] += len(peer.inflight)
                yield from peer.inflight.values()

    def view(self, now: float) -> dict[str, Any]:
        return {**self.counts, "runs": {run: {
            "name": p.name, "heard_age_s": round(now - p.seen, 3), "in_flight": len(p.inflight),
            "gaps": p.gaps, "hears_me": p.hears_me, "same_workers": p.agrees}
            for run, p in self.runs.items()}}


@dataclass(frozen=True)
class Siblings:
    """The processes of one ``gateway --workers N``: this one is ``index`` of ``count``, each publishing
    on ``ipc://DIRECTORY/peer-I``."""

    directory: str
    index: int
    count: int

    def endpoint(self, index: int) -> str:
        return f"ipc://{self.directory}/peer-{index}"

    def others(self) -> list[str]:
        return [self.endpoint(i) for i in range(self.count) if i != self.index]


def new_run() -> str:
    return uuid.uuid4().hex[:16]


class PeerLink:
    """This replica's PUB socket and one SUB per peer (each in its own context, as feedback ports are)."""

    def __init__(self, config: PeerConfig, name: str, table: str, keys: CurveKeys | None,
                 peer_key: Callable[[str], bytes], run: str | None = None,
                 siblings: Siblings | None = None) -> None:
        self.config, self.name, self.table, self.keys, self.peer_key = config, name, table, keys, peer_key
        self.siblings = siblings
        self.run = run or new_run()
        self.seq = 0
        self.mine: dict[str, pm.Dispatched] = {}  # this replica's requests in flight, as announced
        self.context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.pub, self.auth = publisher(self.context, config.host, config.port, keys,
                                        siblings.endpoint(siblings.index) if siblings else "")
        self.sent_bytes = 0

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def send(self, msg: pm.Notice) -> None:
        frame = pm.encode(msg)
        self.sent_bytes += len(frame)
        with contextlib.suppress(zmq.Again):  # PUB drops at its high-water mark; peers count the gap
            self.pub.send(frame, zmq.NOBLOCK)

    def dispatched(self, rid: str, client: str, worker: int, tokens: bytes) -> None:
        msg = pm.Dispatched(self.run, self._next(), rid, client, worker, tokens)
        self.mine[rid] = msg
        self.send(msg)

    def finished(self, rid: str, output_tokens: int) -> None:
        if self.mine.pop(rid, None) is not None:
            self.send(pm.Finished(self.run, self._next(), rid, output_tokens))

    def alive(self, heard: list[str]) -> None:
        self.send(pm.Alive(self.run, self._next(), self.name, self.table, tuple(heard)))

    def replay(self) -> int:
        """Re-send this replica's requests in flight (a new peer hears it); how many."""
        for msg in list(self.mine.values()):
            self.send(pm.Dispatched(self.run, self._next(), msg.rid, msg.client, msg.worker, msg.tokens,
                                    replay=True))
        return len(self.mine)

    def subscribe(self, key_name: str) -> tuple[Any, Any]:
        """An asyncio context and SUB socket for one peer entry (CURVE with the peer's own key); it is
        connected to the entry's addresses by ``peer_dns.PeerEndpoints``."""
        context = zmq.asyncio.Context()
        server_key = self.peer_key(key_name) if self.keys is not None else None
        return context, subscriber(context, None, self.keys, server_key)

    def close(self) -> None:
        if self.auth is not None:
            self.auth.stop()
        self.context.destroy(linger=0)


async def receive(sock: Any, on_notice: Callable[[pm.Notice], None]) -> None:
    """Hand every valid notice on ``sock`` to ``on_notice`` (an invalid one is logged and dropped)."""
    while True:
        frame = await sock.recv()
        try:
            msg = pm.decode_notice(frame)
        except pm.MessageError as err:
            logger.warning("gateway: dropped a peer's message: %s", err)
            continue
        on_notice(msg)


async def run_link(link: PeerLink, on_notice: Callable[[pm.Notice], None],
                   tick: Callable[[], None]) -> None:
    """Listen to every peer and call ``tick`` every ``--peer-interval`` until cancelled."""
    subs = [(link.subscribe(key), address) for key, address in link.config.peers()]
    listeners = [asyncio.create_task(receive(sock, on_notice)) for (_, sock), _ in subs]
    listeners += [asyncio.create_task(PeerEndpoints(sock, address).follow()) for (_, sock), address in subs]
    if link.siblings is not None:  # the other processes of this gateway: fixed endpoints, no keys
        context = zmq.asyncio.Context()
        sock = subscriber(context, None)
        for endpoint in link.siblings.others():
            sock.connect(endpoint)
        subs.append(((context, sock), ""))
        listeners.append(asyncio.create_task(receive(sock, on_notice)))
    try:
        while True:
            tick()
            await asyncio.sleep(link.config.interval)
    finally:
        for task in listeners:
            task.cancel()
        for (context, _), _ in subs:
            context.destroy(linger=0)
