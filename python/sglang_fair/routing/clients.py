"""A routing host's book of clients (the router process's and the gateway's): requests in flight per
client, the bound on them, and which clients have been idle for a TTL, so the host can tell the policy
to ``forget`` them. Time is passed in."""

from __future__ import annotations

from collections import Counter, OrderedDict

from sglang_fair.core.idle_clients import IdleClients


class ClientOverLimit(RuntimeError):
    """The client already has as many requests in flight as its host allows one client."""


class ClientBook:
    """``inflight``: client -> requests in flight; ``last_active``: client -> last event, oldest first
    (kept only with a TTL). ``host`` names the bound's owner in the refusal."""

    def __init__(self, ttl: float = 0.0, max_inflight: int = 0, host: str = "router") -> None:
        self.ttl, self.max_inflight, self.host = ttl, max_inflight, host
        self.inflight: Counter[str] = Counter()
        self.idle = IdleClients(ttl)

    @property
    def last_active(self) -> OrderedDict[str, float]:
        return self.idle.last_active

    def admit(self, client: str) -> None:
        """Raise :class:`ClientOverLimit` if ``client`` is at the bound (0: none)."""
        held = self.inflight[client]
        if 0 < self.max_inflight <= held:
            raise ClientOverLimit(f"client {client!r} already has {held} requests in flight "
                                  f"(the {self.host}'s limit per client); retry later")

    def enter(self, client: str, now: float) -> None:
        self.inflight[client] += 1
        self.touch(client, now)

    def leave(self, client: str) -> None:
        self.inflight[client] -= 1
        if not self.inflight[client]:
            del self.inflight[client]

    def touch(self, client: str, now: float) -> None:
        self.idle.touch(client, now)

    def expire(self, now: float) -> list[str]:
        """Drop and return the clients without a request in flight for ``ttl`` seconds (the host
        tells its policy to forget them); one still busy is looked at again a TTL later."""

        def idle(client: str) -> bool:
            if self.inflight[client]:
                return False
            del self.inflight[client]
            return True

        return self.idle.expire(now, idle)
