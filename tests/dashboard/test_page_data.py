"""The page's data (rows, what a key may read) and the answer counts."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from page_support import FAIRNESS

from sglang_fair.dashboard.history import History
from sglang_fair.dashboard.model import page_data
from sglang_fair.dashboard.status import NO_CLIENT, OTHER, StatusBook, StatusMiddleware
from sglang_fair.edge.identity import SCOPE_KEY


def history() -> History:
    h = History(window_s=60, interval_s=1)
    h.add(10.0, {c: {**f, "service": 0.0} for c, f in FAIRNESS.items()})
    h.add(11.0, FAIRNESS)
    return h


def test_rows_carry_fairness_figures_edge_answers_and_a_place_for_the_tenant() -> None:
    book = StatusBook()
    for status in (200, 200, 429, 503, 401):
        book.count("flood" if status != 401 else None, status)
    data = page_data("serve", "dlpm_light", history(), 11.0, FAIRNESS, book.view(), [], {"value": None})
    flood, light = data["clients"][:2]
    assert flood["client"] == "flood" and light["client"] == "light" and flood["tenant"] is None
    assert {k: flood[k] for k in ("service", "waiting", "running", "requests", "hit_rate_total")} == {
        "service": 900.0, "waiting": 3, "running": 2, "requests": 9, "hit_rate_total": 0.8}
    assert (flood["answers"], flood["refused"], flood["server_errors"]) == (4, 1, 1)
    assert data["clients"][2]["client"] == NO_CLIENT and data["clients"][2]["client_errors"] == 1
    assert data["series"]["clients"] == {"flood": [0.9], "light": [0.1]}
    assert data["totals"]["refused"] == 1 and data["version"] == 1


def test_a_client_key_reads_its_own_row_and_the_others_only_as_others() -> None:
    data = page_data("serve", "dlpm", history(), 11.0, FAIRNESS, {}, [], {"value": None}, allowed={"light"})
    assert [r["client"] for r in data["clients"]] == ["light"]
    assert data["series"]["clients"] == {"light": [0.1]} and data["series"]["others"] == [0.9]
    assert "flood" not in json.dumps(data)


def test_answers_are_counted_per_client_and_bounded() -> None:
    book = StatusBook(max_clients=2)
    statuses = {"/ok": 200, "/busy": 429}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        scope.setdefault("state", {})[SCOPE_KEY] = scope["headers"][0][1].decode()
        await send({"type": "http.response.start", "status": statuses[scope["path"]]})
        await send({"type": "http.response.body", "body": b""})

    async def noop(message: Any) -> None:
        return None

    middleware = StatusMiddleware(app, book)
    for client, path in (("a", "/ok"), ("a", "/busy"), ("b", "/ok"), ("c", "/ok")):
        scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"x", client.encode())]}
        asyncio.run(middleware(scope, noop, noop))
    asyncio.run(middleware({"type": "http", "method": "GET", "path": "/ok", "headers": [(b"x", b"a")]},
                           noop, noop))  # a GET (the page, /health) is not a model request
    assert book.view()["a"] == {"requests": 2, "refused": 1, "client_errors": 0, "server_errors": 0}
    assert set(book.view()) == {"a", "b", OTHER}
