"""A ZMQ PUSH socket that never blocks the router's loop.

ZMQ's ``send`` blocks once the peer's queue reaches the high-water mark (1,000 messages by default):
one stalled worker would then stop the router's only loop, liveness checks included. An
:class:`Outbox` sends without blocking; what ZMQ will not take now waits in a bounded backlog, in
order (so a ``Cancel`` never overtakes its ``Dispatch``), and is retried by :meth:`Outbox.flush` on
every turn of the loop. When the backlog is full, :meth:`Outbox.send` refuses and the caller fails the
request (or drops the notice) instead of waiting.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import zmq

Frames = Sequence[bytes]


class Outbox:
    """``make()`` builds the socket (again after :meth:`reset`); at most ``limit`` messages wait."""

    def __init__(self, make: Callable[[], zmq.Socket[bytes]], limit: int) -> None:
        self.make, self.limit = make, limit
        self.sock = make()
        self.pending: deque[Frames] = deque()

    def send(self, frames: Frames) -> bool:
        """Send or queue ``frames``; False when the backlog is full (nothing was queued)."""
        if not self.pending and self._try(frames):
            return True
        if len(self.pending) >= self.limit:
            return False
        self.pending.append(frames)
        return True

    def flush(self) -> None:
        """Send what waits, in order, until ZMQ refuses again."""
        while self.pending and self._try(self.pending[0]):
            self.pending.popleft()

    def reset(self) -> None:
        """Drop the backlog and the messages ZMQ still holds for the peer (a dead worker must not
        run, when it comes back, requests already failed to their clients): a fresh socket."""
        self.pending.clear()
        self.sock.close(0)
        self.sock = self.make()

    def close(self) -> None:
        self.sock.close(0)

    def _try(self, frames: Frames) -> bool:
        try:
            self.sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return False
        return True
