"""The router process: ZMQ sockets around :class:`RouterState`.

Sockets: ``frontend`` (PULL, bound) receives Submit/Abort from frontends; ``failures`` (PUSH, bound)
sends Failed notices back; ``feedback`` (PULL, bound) receives Finished/Evicted/Heartbeat from all
workers; one PUSH per worker connects to the worker's bound PULL endpoint. A malformed or unknown
message is logged and dropped; it never stops the loop. Objects that survive half a second (the
global tree, mostly) are frozen out of the garbage collector, whose full passes over a large tree
otherwise cost milliseconds of added latency; the tree breaks its own reference cycles on removal.
At start it sends every worker ``Hello``; the ``Holding`` answers put what the workers already hold
back in flight (after a router restart). An answer names the router run it answers: one still queued
for the previous run is ignored, and one lost while the worker's feedback socket reconnects is asked
for again each time the worker is heard from after the last ask, up to ``HELLO_ASKS`` times (a
worker of protocol 2 never answers). Sends never block (``outbox.py``): a worker that stops
reading gets a bounded backlog, then its new requests fail with a reason instead of stalling the
loop; a worker declared dead gets a fresh socket.
The loop's liveness check (every half second) also polls the tenant file's reloader, where one is given
(``tenants.py``): a reload happens between two messages, never inside one.
Each dispatch's time inside the router (Submit frame received -> Dispatch sent) is counted in a
1 us histogram, summarised in the snapshot as ``submit_to_dispatch_us``.
"""

from __future__ import annotations

import gc
import json
import logging
import math
import os
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate
from typing import Any

import zmq

from sglang_fair.edge.reload import TenantReloader
from sglang_fair.routing import NoWorkerError, RoutingPolicy
from sglang_fair.routing.clients import ClientOverLimit
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import MessageError, encode
from sglang_fair_router.config import ServiceConfig
from sglang_fair_router.outbox import Outbox
from sglang_fair_router.state import RouterState

log = logging.getLogger("sglang_fair.router")
HELLO_ASKS = 10


class LatencyHistogram:
    """Durations in 1 us buckets up to ``size`` us (one overflow bucket): O(1) to record."""

    def __init__(self, size: int = 16384) -> None:
        self.size = size
        self.counts = array("q", bytes(8 * (size + 1)))
        self.max_ns = 0

    def record(self, ns: int) -> None:
        self.counts[min(ns // 1000, self.size)] += 1
        if ns > self.max_ns:
            self.max_ns = ns

    def summary(self, since: array[int] | None = None) -> dict[str, float]:
        """count, p50/p99/p999 and max (tops of 1 us buckets; an overflow max is the exact one) of
        what was recorded after ``since``, an earlier copy of ``counts``."""
        counts = self.counts if since is None else array("q", map(int.__sub__, self.counts, since))
        cum = list(accumulate(counts))
        n = cum[-1]
        out: dict[str, float] = {"count": n}
        for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("max", 1.0)):
            out[name] = float(bisect_left(cum, max(1, math.ceil(q * n))) + 1) if n else 0.0
        if counts[self.size]:
            out["max"] = self.max_ns / 1e3
        return out


class RouterService:
    def __init__(self, config: ServiceConfig, policy: RoutingPolicy,
                 clock: Callable[[], float] = time.monotonic, tenants: TenantReloader | None = None) -> None:
        config.require_endpoints()
        self.config = config
        self.clock = clock
        self.tenants = tenants
        self.state = RouterState(policy, config.heartbeat_timeout, config.stall_timeout, config.client_ttl,
                                 config.client_max_inflight)
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.frontend = self._socket(zmq.PULL, config.frontend, bind=True)
        self.failures = Outbox(lambda: self._socket(zmq.PUSH, config.failures, bind=True), 1 << 16)
        self.feedback = self._socket(zmq.PULL, config.feedback, bind=True)
        self.to_workers = [Outbox(self._connector(e), config.send_backlog) for e in config.worker_endpoints()]
        self.run_id = os.urandom(8).hex()  # names this run in Hello, so a stale Holding is told apart
        self.unanswered: dict[int, tuple[int, float]] = {}  # worker -> (asks so far, last ask)
        for worker in range(len(self.to_workers)):  # what they already hold (this may be a restarted router)
            self._ask(worker, 0)
        self.submit_latency = LatencyHistogram()
        self._state_view = self._view()
        self._write_state()
        self._stop = False

    @property
    def snapshot(self) -> dict[str, Any]:
        """The last state view (refreshed by the loop) and the router-internal latency so far."""
        return {**self._state_view, "submit_to_dispatch_us": self.submit_latency.summary()}

    def _socket(self, kind: int, endpoint: str, bind: bool) -> zmq.Socket:  # type: ignore[type-arg]
        sock: zmq.Socket[bytes] = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        (sock.bind if bind else sock.connect)(endpoint)
        return sock

    def _connector(self, endpoint: str) -> Callable[[], zmq.Socket[bytes]]:
        return lambda: self._socket(zmq.PUSH, endpoint, bind=False)

    def stop(self) -> None:
        self._stop = True

    def serve_forever(self, poll_ms: int = 100) -> None:
        gc.collect()
        gc.freeze()  # long-lived state (the tree) leaves the collector's generations: no long pauses
        poller = zmq.Poller()
        poller.register(self.frontend, zmq.POLLIN)
        poller.register(self.feedback, zmq.POLLIN)
        last_check = self.clock()
        outboxes = [self.failures, *self.to_workers]
        while not self._stop:
            waiting = any(box.pending for box in outboxes)
            ready = dict(poller.poll(min(poll_ms, 5) if waiting else poll_ms))
            for box in outboxes:
                box.flush()
            if self.feedback in ready:
                self._drain(self.feedback, self._on_feedback)
            if self.frontend in ready:
                self._drain(self.frontend, self._on_frontend)
            now = self.clock()
            if now - last_check >= min(0.5, self.config.heartbeat_timeout / 4):
                self._check_liveness(now)
                self._ask_again()
                self.state.expire(now)
                self._reload_tenants(now)
                self._state_view = self._view()
                self._write_state()
                gc.freeze()
                last_check = now
        self.close()

    def _reload_tenants(self, now: float) -> None:
        if self.tenants is None:
            return
        try:
            self.tenants.poll(now)
        except Exception:  # a reload that fails is logged; routing goes on with the weights in force
            log.exception("reloading the tenant file %s failed", self.tenants.path)

    def _write_state(self) -> None:
        """Rewrite ``--router-state-file`` (atomically) with :attr:`snapshot`, for ``serve``'s main port."""
        if self.config.state_file:
            tmp = f"{self.config.state_file}.tmp"
            with open(tmp, "w") as out:
                json.dump(self.snapshot, out)
            os.replace(tmp, self.config.state_file)

    def _view(self) -> dict[str, Any]:
        self.state.send_backlog = [len(box.pending) for box in self.to_workers]
        return self.state.snapshot()

    def _ask(self, worker: int, asks: int) -> None:
        self.to_workers[worker].send([encode(wm.Hello(self.run_id))])
        self.unanswered[worker] = (asks + 1, self.clock())

    def _ask_again(self) -> None:
        for worker, (asks, asked_at) in list(self.unanswered.items()):
            seen = self.state.last_seen[worker]
            if asks >= HELLO_ASKS:
                del self.unanswered[worker]
            elif seen is not None and seen > asked_at:
                self._ask(worker, asks)

    def _check_liveness(self, now: float) -> None:
        alive = set(self.state.policy.alive)
        for rid, reason in self.state.check_liveness(now):
            self._fail(rid, reason)
        for worker in alive - set(self.state.policy.alive):
            self.to_workers[worker].reset()

    def _fail(self, rid: str, reason: str, status: int = 503) -> None:
        if not self.failures.send([encode(fm.Failed(rid, reason, status))]):
            self.state.counts["dropped"] += 1
            log.warning("failure notice for %s dropped: the frontend is not reading", rid)

    def close(self) -> None:
        for box in [self.failures, *self.to_workers]:
            box.close()
        self.frontend.close(0)
        self.feedback.close(0)

    def _drain(self, sock: zmq.Socket, handle: Callable[[list[bytes]], None]) -> None:  # type: ignore[type-arg]
        for _ in range(1024):  # bounded, so neither direction starves the other
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return
            try:
                handle(frames)
            except MessageError as err:
                self.state.counts["dropped"] += 1
                log.warning("dropped a message: %s", err)

    def _on_frontend(self, frames: list[bytes]) -> None:
        t0 = time.perf_counter_ns()
        msg = fm.decode_inbound(frames[0])
        if isinstance(msg, fm.Abort):
            worker = self.state.abort(msg.rid)
            if worker is not None and not self.to_workers[worker].send([encode(wm.Cancel(msg.rid))]):
                self.state.counts["dropped"] += 1  # its finish still comes back from the worker
            return
        if len(frames) != 2:
            raise MessageError(f"submit {msg.rid}: expected 2 frames, got {len(frames)}")
        try:
            worker = self.state.submit(msg, self.clock())
        except NoWorkerError as err:
            self._fail(msg.rid, str(err))
            return
        except ClientOverLimit as err:
            self._fail(msg.rid, str(err), 429)
            return
        if not self.to_workers[worker].send([encode(wm.Dispatch(msg.rid)), frames[1]]):
            self.state.fail(msg.rid)
            self._fail(msg.rid, f"worker {worker} is not taking requests ({self.config.send_backlog} "
                                "dispatches already wait to be sent to it)")
            return
        self.submit_latency.record(time.perf_counter_ns() - t0)

    def _on_feedback(self, frames: list[bytes]) -> None:
        msg = wm.decode_feedback(frames[0])
        if isinstance(msg, wm.Holding):
            if msg.router and msg.router != self.run_id:
                self.state.counts["ignored_feedback"] += 1  # it answers an earlier run of the router
                return
            self.unanswered.pop(msg.worker, None)
        self.state.feedback(msg, self.clock())
