"""A running slot kept for a light client about to return (``dlpm_light``'s fourth change).

A light client (one request at a time beside a flood, ``DLPMLight.light_clients``) is scanned first, but
when every running slot is taken its request still waits for a running one to finish: on a worker of 8
running requests with a flood of short answers that is most of a light request's latency. A light client
that sends its next request as soon as one is answered (a chat, an agent's loop) is back within its measured
return time (``returns.py``; the default router sends a client of one request at a time back to the worker
of its last request), so while such a return is due, requests of other clients leave a slot free for it: at
most ``SHARE`` of the worker's slots, and only for the return's wait, so the flood keeps every slot when the
light clients send now and then or are gone. A light client uses less than its share: the slot serves what
fairness owes it. Time is passed in.
"""

from __future__ import annotations

from collections.abc import Callable

from sglang_fair.admission.base import Budget, WaitingRequest

SHARE = 0.25  # the most of a worker's running slots kept for light clients' returns


def slots_to_keep(due: int, running: int, room: int) -> int:
    """One slot per light client whose return is due, at most ``SHARE`` of the worker's slots
    (``running`` + ``room``)."""
    return min(due, int(SHARE * (running + room)))


class ReservedBudget:
    """``budget`` (whose ``room`` says how many more requests may start) where a request of a client
    ``is_light`` does not hold may not take the last ``keep`` slots."""

    def __init__(self, budget: Budget, room: Callable[[], int | None], keep: int,
                 is_light: Callable[[str], bool]) -> None:
        self.budget, self.room, self.keep, self.is_light = budget, room, keep, is_light

    def exhausted(self) -> bool:
        return self.budget.exhausted()

    def try_add(self, req: WaitingRequest) -> bool:
        if not self.is_light(req.client) and (self.room() or 0) <= self.keep:
            return False
        return self.budget.try_add(req)
