"""``serve``'s edge enforcing the tenant file's budgets (``budgets.py``): 429, ``Retry-After`` and an
OpenAI-style body for a tenant that used its requests or tokens of the minute.

Requests are charged as they pass; tokens as the schedulers count them: ``token_totals`` gives each
client's input + output tokens so far (the schedulers' published figures, what ``/fairness`` shows), and
the growth since the last look is charged, looked at most every :data:`SYNC_S` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from sglang_fair.edge.asgi import ASGIApp, Receive, Scope, Send
from sglang_fair.edge.budgets import BudgetBook, OverBudget
from sglang_fair.edge.errors import send_error
from sglang_fair.edge.identity import client_in

SYNC_S = 0.25


class TokenMeter:
    """Charges a :class:`BudgetBook` with the growth of per-client token totals past the largest seen
    (a total that shrank, e.g. a scheduler's figures missing from one look, is charged only once it
    grows past it again; the first look is the base of every client, and so is the first look after a
    reload gave a client its budget)."""

    def __init__(self, book: BudgetBook, totals: Callable[[], Mapping[str, int]]) -> None:
        self.book, self.totals = book, totals
        self.seen: dict[str, int] = {}
        self.synced_at: float | None = None
        self.bounded: set[str] = set()  # the budgeted clients at the last look

    def sync(self, now: float) -> None:
        if self.synced_at is not None and now - self.synced_at < SYNC_S:
            return
        first, self.synced_at = self.synced_at is None, now
        fresh = set(self.book.budgets) - self.bounded  # what came before a budget is not charged
        self.bounded = set(self.book.budgets)
        for client, total in self.totals().items():
            if client in self.book.budgets:
                grown = total - self.seen.get(client, 0)
                self.seen[client] = max(total, self.seen.get(client, 0))
                if grown > 0 and not first and client not in fresh:
                    self.book.charge(client, now, tokens=grown)


class BudgetMiddleware:
    """ASGI middleware inside the identity middleware: a POST of a tenant over its budget gets 429."""

    def __init__(self, app: ASGIApp, book: BudgetBook, meter: TokenMeter | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.app, self.book, self.meter, self.clock = app, book, meter, clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = client_in(scope)
        if client is None or client not in self.book.budgets or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        now = self.clock()
        if self.meter is not None:
            self.meter.sync(now)
        try:
            self.book.admit(client, now)
        except OverBudget as err:
            await send_error(send, 429, "TooManyRequests", str(err),
                             [(b"retry-after", str(err.retry_after).encode())])
            return
        await self.app(scope, receive, send)
