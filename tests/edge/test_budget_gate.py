"""``serve``'s budget gate (``edge/budget_gate.py``): behind the identity middleware, a tenant that used its
requests of the minute gets 429 with Retry-After and the edge's body, others pass; tokens are charged
from the schedulers' totals as they grow (the first look is the base), so output counts too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

from sglang_fair.edge.budget_gate import SYNC_S, BudgetMiddleware, TokenMeter
from sglang_fair.edge.budgets import Budget, BudgetBook
from sglang_fair.edge.identity import ClientIdentityMiddleware
from sglang_fair.edge.keys import KeyTable

KEYS = KeyTable({"k-small": "small", "k-big": "big"}, {}, {"small": Budget(2, 0)})


def post(app: Any, key: str, method: str = "POST") -> list[MutableMapping[str, Any]]:
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/v1/completions", "method": method, "client": ("10.0.0.1", 5),
             "headers": [(b"authorization", f"Bearer {key}".encode())]}
    asyncio.run(app(scope, receive, send))
    return sent


def test_a_tenant_over_its_requests_gets_429_and_the_others_pass() -> None:
    entered: list[str] = []
    now = [100.0]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        entered.append(scope["state"]["sglang_fair_client"])

    book = BudgetBook(KEYS.budgets)
    edge = ClientIdentityMiddleware(BudgetMiddleware(app, book, clock=lambda: now[0]), KEYS, "X-Client-Id",
                                    lambda: False)
    assert post(edge, "k-small") == [] and post(edge, "k-small") == []
    refused = post(edge, "k-small")
    assert refused[0]["status"] == 429 and (b"retry-after", b"60") in refused[0]["headers"]
    assert json.loads(refused[1]["body"])["type"] == "TooManyRequests"
    assert post(edge, "k-big") == [] and post(edge, "k-small", "GET") == []  # reads are not charged
    now[0] += 60.0
    assert post(edge, "k-small") == []
    assert entered == ["small", "small", "big", "small", "small"]


def test_tokens_are_charged_as_the_schedulers_count_them() -> None:
    totals = {"small": 5000, "big": 100}
    book = BudgetBook({"small": Budget(0, 1000)})
    meter = TokenMeter(book, lambda: dict(totals))
    meter.sync(0.0)  # the base: what the server counted before is not charged
    book.check("small", 0.0)
    totals["small"] += 600
    meter.sync(0.1)  # within SYNC_S: not looked at
    assert book.view(0.1)["small"]["tokens_used"] == 0
    meter.sync(SYNC_S)
    assert book.view(SYNC_S)["small"]["tokens_used"] == 600
    totals["small"] = 0  # a scheduler's figures missing from one look: nothing charged twice
    meter.sync(2 * SYNC_S)
    totals["small"] = 5600 + 500
    meter.sync(3 * SYNC_S)
    assert book.view(3 * SYNC_S)["small"]["tokens_used"] == 1100
    assert "big" not in book.usage  # an unbounded tenant keeps no window
