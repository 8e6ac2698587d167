"""Reloading the tenant file (``edge/reload.py``): a valid change is applied, an invalid file is refused
with its file:line and the running table stays, an unchanged file does nothing, a part that needs a
restart keeps its running value with a log line; the identity middleware and the budget gate follow a
reload at their next request (time passed in: no sleeping)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.budget_gate import SYNC_S, BudgetMiddleware, TokenMeter
from sglang_fair.edge.budgets import Budget, BudgetBook
from sglang_fair.edge.identity import ClientIdentityMiddleware
from sglang_fair.edge.keys import KeyTable, load_key_file
from sglang_fair.edge.reload import PARTS, LiveTenants, TenantReloader

FIRST = '[tenants.alice]\nkeys = ["k-alice"]\nweight = 2\n\n[tenants.bob]\nkeys = ["k-bob"]\n'
SECOND = FIRST + '\n[tenants.carol]\nkeys = ["k-carol"]\nrequests_per_minute = 1\n'
BROKEN = FIRST + '\n[tenants.dave]\nkeys = ["k-dave"]\nweigth = 3\n'  # line 8 heads the bad tenant


def write(path: Path, text: str, bump: int = 0) -> None:
    path.write_text(text)
    stat = path.stat()  # a later mtime, as an editor's save gives (a test may run within one tick)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + bump * 1_000_000_000))


class Applied:
    def __init__(self, refuse: str = "") -> None:
        self.tables: list[KeyTable] = []
        self.refuse = refuse

    def __call__(self, table: KeyTable) -> None:
        if self.refuse:
            raise ConfigError(self.refuse)
        self.tables.append(table)


def reloader(tmp_path: Path, text: str = FIRST, parts: frozenset[str] = frozenset(PARTS),
             applied: Applied | None = None) -> tuple[TenantReloader, Applied, Path]:
    path = tmp_path / "tenants.toml"
    write(path, text)
    applied = applied or Applied()
    return TenantReloader(str(path), load_key_file(str(path)), applied, parts, poll_s=2.0), applied, path


def test_a_valid_change_is_applied_at_the_next_look(tmp_path: Path) -> None:
    r, applied, path = reloader(tmp_path)
    assert r.poll(0.0) is None  # the first look: the file as started
    write(path, SECOND, bump=1)
    assert r.poll(1.0) is None  # within poll_s: not looked at yet
    outcome = r.poll(2.5)
    assert outcome is not None and outcome.applied == ("clients", "budgets") and not outcome.error
    assert applied.tables[-1].clients["k-carol"] == "carol"
    assert applied.tables[-1].budgets == {"carol": Budget(1, 0)}
    assert r.table is applied.tables[-1]


def test_an_invalid_file_is_refused_with_its_line_and_the_table_stays(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    r, applied, path = reloader(tmp_path)
    before = r.table
    write(path, BROKEN, bump=1)
    with caplog.at_level(logging.ERROR, logger="sglang_fair"):
        outcome = r.poll(10.0)
    assert outcome is not None
    assert outcome.error.startswith(f"{path}:8: tenant 'dave': unknown field(s) weigth")
    assert f"{path}:8:" in caplog.text and "running configuration stays" in caplog.text
    assert applied.tables == [] and r.table is before
    assert r.poll(20.0) is None  # the same broken file is not refused again at every look
    write(path, SECOND, bump=2)  # fixed: applied
    assert r.poll(30.0) is not None and r.table.clients["k-carol"] == "carol"


def test_an_unchanged_file_does_nothing(tmp_path: Path) -> None:
    r, applied, path = reloader(tmp_path)
    write(path, FIRST, bump=5)  # saved again with the same contents: a new mtime
    assert r.poll(10.0) is None
    r.request()  # SIGHUP with nothing changed
    outcome = r.poll(10.1)
    assert outcome is not None and outcome.applied == () and outcome.kept == ()
    assert applied.tables == []


def test_sighup_looks_at_once_and_a_refusing_apply_keeps_the_table(tmp_path: Path) -> None:
    r, _, path = reloader(tmp_path, applied=Applied(refuse="client 'alice': weight 3 conflicts"))
    r.poll(0.0)
    write(path, FIRST.replace("weight = 2", "weight = 3"), bump=1)
    r.request()
    outcome = r.poll(0.1)  # before poll_s: the request makes it look
    assert outcome is not None and "conflicts" in outcome.error
    assert r.table.weights == {"alice": 2.0}


def test_a_part_that_needs_a_restart_keeps_its_running_value(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    r, applied, path = reloader(tmp_path, parts=frozenset({"clients", "budgets"}))
    write(path, SECOND.replace("weight = 2", "weight = 5"), bump=1)
    with caplog.at_level(logging.WARNING, logger="sglang_fair"):
        outcome = r.poll(5.0)
    assert outcome is not None and outcome.applied == ("clients", "budgets") and outcome.kept == ("weights",)
    assert "weights changed but cannot change here while serving" in caplog.text
    assert applied.tables[-1].weights == {"alice": 2.0} and "k-carol" in applied.tables[-1].clients


def post(app: Any, key: str) -> int:
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/v1/completions", "method": "POST", "client": ("10.0.0.1", 5),
             "headers": [(b"authorization", f"Bearer {key}".encode())]}
    asyncio.run(app(scope, receive, send))
    return int(sent[0]["status"]) if sent else 200


def test_the_edge_follows_a_reload_at_its_next_request(tmp_path: Path) -> None:
    path = tmp_path / "tenants.toml"
    write(path, FIRST)
    tenants, book = LiveTenants(load_key_file(str(path))), BudgetBook({})

    async def app(scope: Any, receive: Any, send: Any) -> None:
        return None

    def apply(table: KeyTable) -> None:
        tenants.table = table
        book.set_budgets(table.budgets)

    edge = ClientIdentityMiddleware(BudgetMiddleware(app, book, clock=lambda: 0.0), tenants, "X-Client-Id",
                                    lambda: False)
    r = TenantReloader(str(path), tenants.table, apply, frozenset(PARTS))
    assert post(edge, "k-carol") == 401
    write(path, SECOND, bump=1)
    r.poll(3.0)
    assert [post(edge, "k-carol"), post(edge, "k-carol"), post(edge, "k-alice")] == [200, 429, 200]


def test_a_budget_given_by_a_reload_does_not_charge_the_tokens_before_it() -> None:
    totals = {"t": 50_000}
    book = BudgetBook({})
    meter = TokenMeter(book, lambda: dict(totals))
    meter.sync(0.0)
    book.set_budgets({"t": Budget(0, 1000)})
    meter.sync(SYNC_S)  # the first look since the budget: the base
    book.check("t", SYNC_S)
    totals["t"] += 1000
    meter.sync(2 * SYNC_S)
    assert book.view(2 * SYNC_S)["t"]["tokens_used"] == 1000
