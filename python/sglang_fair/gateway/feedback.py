"""What the gateway hears from every server's feedback port: evictions for the tree, heartbeats for liveness.

A server started with ``--feedback-port`` publishes its workers' notices (``links/
feedback_hub.py``; the router's own messages, ``worker_msgs``) and says where at ``GET
/sglang_fair/feedback``; discovery reads that (``servers.py``), so the gateway needs only URLs. One
ZMQ SUB socket per server connects to ``tcp://HOST:PORT``, HOST from the server's URL, as a CurveZMQ
client with ``--feedback-keys`` when the server speaks CURVE. ``Evicted`` reaches the policy as
``on_evict`` of the global worker, so the tree forgets what a cache dropped; ``Heartbeat`` feeds
:class:`Liveness`; ``Finished`` and ``Holding`` concern the server's own router and are skipped (the
gateway hears each finish when the response ends).

:class:`Liveness` is pure (time passed in): a worker is out when no heartbeat came for
``heartbeat_timeout`` (a dead or stopped process) or its loop count stood still for ``stall_timeout``
while the gateway had requests in flight on it (a hung loop), unless its answers brought tokens within
the heartbeat timeout (then the feedback link is down, not the worker: it stays in). Its server is then
taken out with the requests in flight there failed with 503, and taken back when every worker beats
and moves again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import zmq
import zmq.asyncio

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.servers import WorkerTable
from sglang_fair.links.curve import CurveKeys
from sglang_fair.links.sockets import subscriber
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import MessageError

logger = logging.getLogger("sglang_fair.gateway")


@dataclass
class Beat:
    seen: float  # the last heartbeat (or when listening began)
    loops: int  # the loop count it carried
    moved: float  # when the loop count last moved (or the worker was last idle)


class Liveness:
    """Heartbeats of the workers that report them; :meth:`verdict` says why one is out, or None."""

    def __init__(self, workers: Sequence[int], heartbeat_timeout: float, stall_timeout: float,
                 now: float) -> None:
        self.heartbeat_timeout, self.stall_timeout = heartbeat_timeout, stall_timeout
        self.beats = {w: Beat(now, -1, now) for w in workers}  # silence counts from the start

    def heard(self, worker: int, loops: int, now: float) -> None:
        beat = self.beats.get(worker)
        if beat is None:
            return
        beat.seen = now
        if loops != beat.loops:
            beat.loops, beat.moved = loops, now

    def verdict(self, worker: int, busy: bool, now: float, answered: float = -math.inf) -> str | None:
        """Why ``worker`` is out (None: alive); ``busy``: the gateway has requests in flight on it;
        ``answered``: when its answers last brought the gateway tokens. Answers within the heartbeat
        timeout show the worker's loop turning whatever its feedback says (the feedback link, not the
        worker, is down), so they keep it in."""
        beat = self.beats.get(worker)
        if beat is None or now - answered <= self.heartbeat_timeout:
            return None
        if not busy:
            beat.moved = max(beat.moved, now)  # nothing to stall on
        if now - beat.seen > self.heartbeat_timeout:
            return f"worker {worker}: no heartbeat for {now - beat.seen:.1f} s"
        if now - beat.moved > self.stall_timeout:
            return (f"worker {worker}: its loop stood still for {now - beat.moved:.1f} s "
                    "with requests in flight")
        return None


@dataclass
class OwnPause:
    """Whether this process itself stood still (SIGSTOP, starved of CPU): a loop meant to wake often
    that wakes over ``limit`` s after its last look did not run, so any silence it would see now is
    its own, and what its sockets queued meanwhile must be heard before anyone is judged silent."""

    limit: float
    last: float

    def late(self, now: float) -> bool:
        """Whether this look comes over ``limit`` s after the last (every look counts as one)."""
        late, self.last = now - self.last > self.limit, now
        return late


@dataclass(frozen=True)
class FeedbackSource:
    """Where one server publishes: its base URL, the ZMQ endpoint, whether it speaks CURVE."""

    url: str
    endpoint: str
    curve: bool


def sources(table: WorkerTable) -> list[FeedbackSource]:
    """The feedback ports of the servers that advertise one."""
    return [FeedbackSource(s.url, s.feedback_endpoint, s.feedback_curve)
            for s in table.servers if s.feedback_endpoint]


def check_keys(found: Sequence[FeedbackSource], keys: CurveKeys | None) -> None:
    """A server that speaks CURVE needs the gateway's keys (a :class:`ConfigError` names it)."""
    need = [s.url for s in found if s.curve]
    if need and keys is None:
        raise ConfigError(f"{', '.join(need)} publish feedback over CurveZMQ: give --feedback-keys DIR")


def subscribe(context: Any, source: FeedbackSource, keys: CurveKeys | None) -> Any:
    """A SUB socket on ``source`` (CURVE when the server speaks it)."""
    return subscriber(context, source.endpoint, keys if source.curve else None)


def global_worker(table: WorkerTable, url: str, msg: wm.Feedback) -> int | None:
    try:
        return table.index(url, msg.worker)
    except KeyError:
        return None


def wait_first_beats(table: WorkerTable, keys: CurveKeys | None, timeout: float,
                     clock: Callable[[], float] = time.monotonic) -> None:
    """Before serving: every worker of every server with a feedback port must be heard within
    ``timeout`` s (a wrong key or a closed port fails silently in ZMQ, so it is caught here)."""
    found = sources(table)
    check_keys(found, keys)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        socks = {subscribe(context, s, keys): s for s in found}
        waiting = {w.index for s in found for w in table.of_server(s.url)}
        poller = zmq.Poller()
        for sock in socks:
            poller.register(sock, zmq.POLLIN)
        deadline = clock() + timeout
        while waiting and clock() < deadline:
            for sock, _ in poller.poll(200):
                msg = _decode(sock.recv())
                index = None if msg is None else global_worker(table, socks[sock].url, msg)
                if isinstance(msg, wm.Heartbeat) and index is not None:
                    waiting.discard(index)
        if waiting:
            silent = sorted({table[i].server.url for i in waiting})
            raise ConfigError(f"no heartbeat within {timeout:.0f} s on the feedback port of "
                              f"{', '.join(silent)} (is the port reachable from here, and are "
                              "--feedback-keys the servers' pair?)")
    finally:
        context.destroy(linger=0)


def _decode(frame: bytes) -> wm.Feedback | None:
    try:
        return wm.decode_feedback(frame)
    except MessageError as err:
        logger.warning("gateway: dropped a feedback message: %s", err)
        return None


class FeedbackListener:
    """The SUB sockets of every feedback port, read in the gateway's event loop."""

    def __init__(self, table: WorkerTable, keys: CurveKeys | None,
                 on_evict: Callable[[int, bytes, int], None], liveness: Liveness,
                 clock: Callable[[], float] = time.monotonic,
                 on_load: Callable[[int, wm.Load], None] | None = None) -> None:
        self.table, self.keys, self.on_evict, self.on_load = table, keys, on_evict, on_load
        self.liveness, self.clock = liveness, clock
        self.counts = {"heartbeats": 0, "evictions": 0, "skipped": 0}

    async def run(self) -> None:
        """Listen to every feedback port, each through its own ZMQ context: libzmq resolves a host name
        in its I/O thread, and a server gone from DNS (a removed container) must not hold up the
        heartbeats of the others."""
        contexts = [zmq.asyncio.Context() for _ in sources(self.table)]
        try:
            await asyncio.gather(*(self._listen(c, s) for c, s in zip(contexts, sources(self.table),
                                                                       strict=True)))
        finally:
            for context in contexts:
                context.destroy(linger=0)

    async def _listen(self, context: Any, source: FeedbackSource) -> None:
        sock = subscribe(context, source, self.keys)
        while True:
            msg = _decode(await sock.recv())
            index = None if msg is None else global_worker(self.table, source.url, msg)
            if index is None or msg is None:
                self.counts["skipped"] += 1
            elif isinstance(msg, wm.Heartbeat):
                self.liveness.heard(index, msg.loops, self.clock())
                self.counts["heartbeats"] += 1
                if msg.load is not None and self.on_load is not None:
                    self.on_load(index, msg.load)
            elif isinstance(msg, wm.Evicted):
                self.on_evict(index, msg.tokens, msg.start)
                self.counts["evictions"] += 1
            else:
                self.counts["skipped"] += 1

    def view(self) -> dict[str, Any]:
        """What arrived, and per worker the age of its last heartbeat and its loop count."""
        now = self.clock()
        return {**self.counts, "workers": {
            w: {"heartbeat_age_s": round(now - b.seen, 3), "loops": b.loops}
            for w, b in self.liveness.beats.items()}}

    def verdicts(self, busy: Callable[[int], bool], answered: Callable[[int], float] = lambda w: -math.inf
                 ) -> Iterator[tuple[str, str | None]]:
        """(server URL, why it is out or None) for every server with a feedback port (``answered``:
        when a worker's answers last brought tokens, :meth:`Liveness.verdict`)."""
        now = self.clock()
        for source in sources(self.table):
            reasons = [self.liveness.verdict(w.index, busy(w.index), now, answered(w.index))
                       for w in self.table.of_server(source.url)]
            yield source.url, next((r for r in reasons if r), None)
