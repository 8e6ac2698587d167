"""A worker stand-in for tests and the benchmark: answers every dispatch at once, sends heartbeats."""

from __future__ import annotations

import threading
import time

import zmq

from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode


class FakeWorker(threading.Thread):
    """Binds ``endpoint``; reports each dispatch finished with ``output_tokens`` on ``feedback``."""

    def __init__(self, index: int, endpoint: str, feedback: str, output_tokens: int = 16,
                 heartbeat_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.index, self.output_tokens, self.heartbeat_s = index, output_tokens, heartbeat_s
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        self.inbox = ctx.socket(zmq.PULL)
        self.inbox.setsockopt(zmq.LINGER, 0)
        self.inbox.bind(endpoint)
        self.outbox = ctx.socket(zmq.PUSH)
        self.outbox.setsockopt(zmq.LINGER, 0)
        self.outbox.connect(feedback)
        self.received: list[tuple[str, str, float]] = []  # rid, client, receive time
        self.alive = True  # set False to simulate a hang (stops answering and heartbeating)
        self.answer = True  # set False to keep requests "running" forever
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        seq, next_beat = 0, 0.0
        while not self._halt.is_set():
            if self.alive and time.monotonic() >= next_beat:
                self.outbox.send(encode(wm.Heartbeat(self.index, seq)))
                seq, next_beat = seq + 1, time.monotonic() + self.heartbeat_s
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
            self.received.append((msg.rid, msg.client, time.monotonic()))
            if self.answer:
                self.outbox.send(encode(wm.Finished(self.index, msg.rid, msg.client, self.output_tokens)))
        else:
            self.outbox.send(encode(wm.Finished(self.index, msg.rid, "?", 0, aborted=True)))
