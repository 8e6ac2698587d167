"""Which clients have been idle for a TTL: the one expiry of every host that forgets idle clients (a
scheduler's fair state, the router process's and the gateway's book of clients). Time is passed in."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable


class IdleClients:
    """Each client's last event, oldest first (kept only with a ``ttl`` > 0; 0: nothing expires)."""

    def __init__(self, ttl: float = 0.0) -> None:
        self.ttl = ttl
        self.last_active: OrderedDict[str, float] = OrderedDict()

    def touch(self, client: str, now: float) -> None:
        """``client`` was active at ``now``."""
        if self.ttl > 0:
            self.last_active[client] = now
            self.last_active.move_to_end(client)

    def expire(self, now: float, forget: Callable[[str], bool]) -> list[str]:
        """The clients without an event for ``ttl`` seconds that ``forget(client)`` let go (the host
        drops its state of them there); one it keeps (still busy) is looked at again a TTL later. Cheap
        when none is due: it looks at the oldest only."""
        gone: list[str] = []
        for _ in range(len(self.last_active) if self.ttl > 0 else 0):
            client, seen = next(iter(self.last_active.items()))
            if now - seen <= self.ttl:
                break
            if forget(client):
                del self.last_active[client]
                gone.append(client)
            else:
                self.touch(client, now)
        return gone
