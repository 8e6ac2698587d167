"""The DP router's state on ``serve``'s main port (``GET /fairness/router``), behind the admin key: no
``--router-http-port`` needed to see that the fair router is on and what it holds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from sglang_fair.core.cost import CostModel
from sglang_fair.edge.admins import AdminOnlyMiddleware
from sglang_fair.edge.identity import ClientIdentityMiddleware
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.sglang_plugin.router_link import RouterLink, RouterSettings, router_command
from sglang_fair.sglang_plugin.router_view import NO_ROUTER, ROUTER_PATH, router_view


def test_no_router_is_404_saying_what_starts_one_and_no_view_yet_is_503(tmp_path: Path) -> None:
    status, body = router_view(None)
    assert status == 404 and body["message"] == NO_ROUTER and "--dp-size" in NO_ROUTER
    link = RouterLink(str(tmp_path), 2)
    assert router_view(link)[0] == 503
    Path(link.state_file).write_text(json.dumps({"policy": "fair_cache_aware", "workers": [{}, {}]}))
    assert router_view(link) == (200, {"policy": "fair_cache_aware", "workers": [{}, {}]})


def test_serve_tells_its_router_where_to_write_the_view(tmp_path: Path) -> None:
    link = RouterLink(str(tmp_path), 2)
    command = router_command(link, "fair_cache_aware", RouterSettings(), CostModel())
    assert command[command.index("--router-state-file") + 1] == link.state_file
    assert link.state_file.startswith(str(tmp_path))


def call(path: str, key: str | None) -> tuple[int | None, bool]:
    sent: list[MutableMapping[str, Any]] = []
    reached = {"app": False}

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached["app"] = True

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    headers = [(b"authorization", f"Bearer {key}".encode())] if key else []
    scope = {"type": "http", "path": path, "method": "GET", "headers": headers, "client": ("10.0.0.1", 1)}
    keys = parse_key_lines(["k-alice alice", "k-ops ops"])
    stack = ClientIdentityMiddleware(AdminOnlyMiddleware(inner, frozenset({"ops"})), keys, "X-Client-Id",
                                     lambda: False)
    asyncio.run(stack(scope, receive, send))
    return (sent[0]["status"] if sent else None), reached["app"]


def test_with_keys_only_an_admin_reads_the_router() -> None:
    assert call(ROUTER_PATH, None) == (401, False)
    assert call(ROUTER_PATH, "k-alice") == (403, False)  # it names every client
    assert call(ROUTER_PATH, "k-ops") == (None, True)
