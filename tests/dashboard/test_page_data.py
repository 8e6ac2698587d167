"""The page's data (rows, what a key may read), the answer counts, the workers from the schedulers' files."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from sglang_fair.dashboard.history import History
from sglang_fair.dashboard.model import page_data
from sglang_fair.dashboard.serve_page import STALL_S, ServePage, scheduler_workers
from sglang_fair.dashboard.status import NO_CLIENT, OTHER, StatusBook, StatusMiddleware
from sglang_fair.sglang_plugin.config import FairConfig
from sglang_fair.sglang_plugin.identity import SCOPE_KEY, TRUST_KEY
from sglang_fair.sglang_plugin.keys import parse_key_lines

FAIRNESS = {"flood": {"service": 900.0, "waiting": 3, "running": 2, "requests": 9, "input_tokens": 1000,
                      "cached_tokens": 800, "output_tokens": 50, "weight": 1.0, "counter": 5.0},
            "light": {"service": 100.0, "waiting": 0, "running": 1, "requests": 4, "input_tokens": 100,
                      "cached_tokens": 0, "output_tokens": 20, "weight": 2.0, "counter": 1.0}}


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


def test_the_serve_page_decides_access_as_fairness_does(tmp_path: Path) -> None:
    keys = parse_key_lines(["k-a a", "k-ops ops"], "keys")
    keyed = ServePage(FairConfig(key_table=keys, fairness_admins="ops"), tmp_path, {}, lambda: 2048)
    assert keyed.allowed({"state": {SCOPE_KEY: "a"}}) == {"a"}
    assert keyed.allowed({"state": {SCOPE_KEY: "ops"}}) is None
    assert keyed.allowed({"state": {SCOPE_KEY: "__gateway__", TRUST_KEY: True}}) is None
    assert keyed.allowed({}) == set()
    assert ServePage(FairConfig(), tmp_path, {}, lambda: None).allowed({}) is None


def test_workers_are_serving_idle_or_stalled_by_their_last_published_step(tmp_path: Path) -> None:
    def write(rank: int, clients: dict[str, Any], age: float) -> None:
        path = tmp_path / f"scheduler-{rank}.json"
        path.write_text(json.dumps({"policy": "dlpm_light", "clients": clients}))
        os.utime(path, (1e9 - age, 1e9 - age))

    write(0, FAIRNESS, 1.0)
    write(1, {}, 500.0)
    write(2, {"x": {"waiting": 2, "running": 0}}, STALL_S + 5)
    rows = scheduler_workers(tmp_path, 1e9)
    assert [(r["name"], r["queue"], r["state"]) for r in rows] == [
        ("worker 0", 6, "serving"), ("worker 1", 0, "idle"), ("worker 2", 2, "stalled")]
    assert "no step published" in rows[2]["why"]


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


def test_the_serve_page_states_the_bound_of_the_router_the_launcher_started(monkeypatch: Any,
                                                                           tmp_path: Path) -> None:
    """With the global router SGLang's own --load-balance-method reads round_robin (the launcher hands the
    routing to the router): the page takes the router's policy from the link the launcher exported."""
    from types import SimpleNamespace

    from sglang_fair.dashboard.serve_page import page_for_server
    from sglang_fair.sglang_plugin.config import ENV_STATE_DIR
    from sglang_fair.sglang_plugin.router_link import ENV_ROUTER, RouterLink

    (tmp_path / "scheduler-0.json").write_text(json.dumps({"policy": "dlpm_light", "clients": FAIRNESS}))
    monkeypatch.setenv(ENV_STATE_DIR, str(tmp_path))
    args = SimpleNamespace(dp_size=2, load_balance_method="round_robin")
    monkeypatch.setenv(ENV_ROUTER, RouterLink("/tmp/x", 2, policy="fair_cache_aware").to_env())
    page = page_for_server(args, FairConfig())
    monkeypatch.setattr(page, "context_len", lambda: 100)
    bound = page.data(None)["bound"]
    assert page.policy_args == {"dp_size": 2, "router": "fair_cache_aware"}
    assert (bound["source"], bound["value"]) == ("[1] Thm 5.1", 2 * 2 * (3 * 100 + 65536))
    monkeypatch.delenv(ENV_ROUTER)
    assert page_for_server(args, FairConfig()).policy_args["router"] == "round_robin"
