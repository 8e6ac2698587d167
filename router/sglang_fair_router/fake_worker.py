"""Worker stand-ins for tests and the benchmark: answer every dispatch at once, send heartbeats."""

from __future__ import annotations

import gc
import math
import os
import threading
import time
from array import array
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import zmq

from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode


class FakeWorker(threading.Thread):
    """Binds ``endpoint``; reports each dispatch finished with ``output_tokens`` on ``feedback``."""

    def __init__(self, index: int, endpoint: str, feedback: str, output_tokens: int = 16,
                 heartbeat_s: float = 0.2, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(daemon=True)
        self.index, self.output_tokens, self.heartbeat_s = index, output_tokens, heartbeat_s
        self.clock = clock
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.inbox = ctx.socket(zmq.PULL)
        self.inbox.setsockopt(zmq.LINGER, 0)
        self.inbox.bind(endpoint)
        self.outbox = ctx.socket(zmq.PUSH)
        self.outbox.setsockopt(zmq.LINGER, 0)
        self.outbox.connect(feedback)
        self.received: list[tuple[str, float]] = []  # rid, receive time
        self.alive = True  # set False to simulate a hang (stops answering and heartbeating)
        self.answer = True  # set False to keep requests "running" forever
        self.lose_finished = False  # set True to finish requests but lose their Finished notices
        self.held: set[str] = set()  # requests "running" (answer False), reported in heartbeats
        self.client = "fake"  # the client it names for what it holds (a Dispatch carries none)
        self.answer_hello = True  # set False to play a worker that does not re-announce (version 2)
        self.lose_holdings = 0  # this many answers to Hello are lost on the way (a reconnecting socket)
        self.prefill_budget: int | None = None  # reported in heartbeats when set (the pab router)
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        seq = 0
        next_beat: float | None = None  # the first heartbeat goes out at once, whatever the clock reads
        while not self._halt.is_set():
            now = self.clock()
            if self.alive and (next_beat is None or now >= next_beat):
                self.outbox.send(encode(wm.Heartbeat(self.index, seq, inflight=len(self.held), loops=seq,
                                                     prefill_budget=self.prefill_budget)))
                seq, next_beat = seq + 1, now + self.heartbeat_s
            if not self.inbox.poll(10):
                continue
            while True:
                try:
                    frames = self.inbox.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if self.alive:
                    self._handle(frames)
        self.inbox.close(0)
        self.outbox.close(0)

    def _handle(self, frames: list[bytes]) -> None:
        msg = wm.decode_to_worker(frames[0])
        if isinstance(msg, wm.Dispatch):
            self.received.append((msg.rid, self.clock()))
            if not self.answer:
                self.held.add(msg.rid)
            elif not self.lose_finished:
                self.outbox.send(encode(wm.Finished(self.index, msg.rid, self.output_tokens)))
        elif isinstance(msg, wm.Hello):
            if not self.answer_hello:
                return
            if self.lose_holdings:
                self.lose_holdings -= 1
                return
            held = sorted(self.held)
            self.outbox.send(encode(wm.Holding(self.index, held, [self.client] * len(held), msg.router)))
        else:
            self.held.discard(msg.rid)
            self.outbox.send(encode(wm.Finished(self.index, msg.rid, 0, aborted=True)))


def serve_pool(endpoints: list[str], feedback: str, received: Any, control: Connection,
               cpus: set[int] | None = None) -> None:
    """``len(endpoints)`` fast fake workers in one single-threaded process, for the benchmark.

    Each payload starts with its frontend send time (``time.monotonic_ns``, 8 bytes little-endian;
    CLOCK_MONOTONIC is one clock for all processes); each receive is counted in ``received`` (a
    shared ``RawValue``) and kept as (send, receive) ns. When ``control`` gets a message (checked
    only while idle) the pool sends back the two arrays and ends.
    """
    if cpus:
        os.sched_setaffinity(0, cpus)
    gc.disable()  # the harness's own collector pauses would show as router latency
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    inboxes = []
    poller = zmq.Poller()
    for endpoint in endpoints:
        sock = ctx.socket(zmq.PULL)
        sock.bind(endpoint)
        poller.register(sock, zmq.POLLIN)
        inboxes.append(sock)
    index = {sock: i for i, sock in enumerate(inboxes)}
    outbox = ctx.socket(zmq.PUSH)
    outbox.connect(feedback)
    sent_ns, recv_ns = array("q"), array("q")
    next_beat, beats = -math.inf, 0  # the first heartbeat goes out at once, whatever the clock reads
    while True:
        now = time.monotonic()
        if now >= next_beat:
            beats += 1
            for w in range(len(inboxes)):
                outbox.send(encode(wm.Heartbeat(w, beats, loops=beats)))  # a loop that keeps moving
            next_beat = now + 0.2
        ready = poller.poll(20)
        if not ready and control.poll():
            control.recv()
            control.send((sent_ns.tobytes(), recv_ns.tobytes()))
            break
        for sock, _ in ready:
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                t = time.monotonic_ns()
                msg = wm.decode_to_worker(frames[0])
                if not isinstance(msg, wm.Dispatch):
                    continue  # Hello: a pool holds nothing between loops
                sent_ns.append(int.from_bytes(frames[1][:8], "little"))
                recv_ns.append(t)
                received.value += 1
                outbox.send(encode(wm.Finished(index[sock], msg.rid, 32)))
    ctx.destroy(0)
