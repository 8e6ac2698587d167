"""A closed-loop client's return: how long after one of its requests finishes here its next one arrives.

A client that keeps N requests in flight sends the next one when one finishes; between the two it has
nothing waiting at the worker, though it is far from done (the I/O schedulers' "deceptive idleness", Iyer
and Druschel, SOSP 2001). DLPM refills when no client with a waiting request has credit, so each such
moment hands every other client a quantum: live, a 4:1 pair with 12 requests per client per worker split
2.5:1, the heavier client's requests coming back ~0.1 s after a batch of them finished together and finding
the freed slots taken. :class:`Returns` measures each client's return time so a refill can wait for it, as
an anticipatory I/O scheduler (Linux CFQ's ``slice_idle``) waits for a process's next synchronous read.
Time is passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

GAP_DECAY = 0.8  # weight of the earlier estimate per new return time
WAIT_FACTOR = 2.0  # a return is awaited for this many times the client's mean return time


class Returns:
    """Per client: the finishes here that no arrival here has answered yet, and its mean return time (a
    finish to the arrival that answers it, in order), from returns shorter than ``longest`` seconds (a
    longer one is the client thinking, not its round trip)."""

    def __init__(self, longest: float) -> None:
        self.longest = longest
        self.unanswered: dict[str, deque[float]] = {}  # finish times, oldest first
        self.gap: dict[str, float] = {}

    def finished(self, client: str, now: float) -> None:
        """A request of ``client`` finished here; finishes older than ``longest`` can no longer be
        answered by a return and are dropped, so a client that stops sending holds at most the
        finishes of ``longest`` seconds."""
        owed = self.unanswered.setdefault(client, deque())
        while owed and now - owed[0] >= self.longest:
            owed.popleft()
        owed.append(now)

    def arrived(self, client: str, now: float) -> None:
        """An arrival answers the oldest unanswered finish, and measures a return time."""
        owed = self.unanswered.get(client)
        if not owed:
            return
        gap = now - owed.popleft()
        if not 0.0 <= gap < self.longest:
            return
        old = self.gap.get(client)
        self.gap[client] = gap if old is None else GAP_DECAY * old + (1.0 - GAP_DECAY) * gap

    def wait(self, client: str) -> float:
        """Seconds after a finish that the client's next request is awaited (0: not measured)."""
        gap = self.gap.get(client)
        return 0.0 if gap is None else min(WAIT_FACTOR * gap, self.longest)

    def awaited(self, now: float, candidates: Iterable[str]) -> bool:
        """Is a return of any of ``candidates`` due: a finish here within the client's wait, unanswered?
        Finishes past their wait are dropped (their requests went elsewhere, or the client is done)."""
        for client in candidates:
            owed = self.unanswered.get(client)
            if not owed:
                continue
            wait = self.wait(client)
            while owed and now - owed[0] >= wait:
                owed.popleft()
            if owed:
                return True
        return False

    def due(self, now: float, client: str) -> bool:
        """Is ``client``'s return due, by :meth:`awaited`, with its return time measured? (Unmeasured,
        its wait is 0 and :meth:`awaited` would drop its finishes before a return could measure it.)"""
        return bool(self.wait(client)) and self.awaited(now, (client,))

    def forget(self, client: str) -> None:
        self.unanswered.pop(client, None)
        self.gap.pop(client, None)
