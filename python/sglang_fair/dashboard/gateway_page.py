"""The fairness page, ``/fairness`` and ``/metrics`` at the gateway, over every server behind it.

Every ``interval_s`` the gateway asks each server for its page data without the series
(``/fairness/ui/data?series=0``, with the gateway's token: a trusted gateway reads every client) and
keeps the last answer of each; a server that does not answer within ``--health-timeout`` keeps its
last figures, listed as ``stale`` (so a server's brief absence is not read as its clients' service
falling and jumping back). Per client the figures are summed over the servers: that sum is the
gateway's ``GET /fairness`` and what its :class:`History` samples. The rows add what only the
gateway knows: each client's requests in flight through it and the answers it gave (429s, errors).
Workers are the gateway's: each one's queue (requests relayed and not ended), and whether its server is
taken out and why. The bound is the servers' (their policy, Q^u, cost and context length) over all
workers under the gateway's routing policy.

Access: without ``--client-keys`` everything is open; with them ``/fairness`` and the data need a key
and show its client only, unless the client is one of ``--fairness-admins``, and ``/metrics`` needs an
admin's key (403 otherwise), as at ``serve``. The page itself holds no figures and is open.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import Response

from sglang_fair.dashboard.bound import stated_bound
from sglang_fair.dashboard.gateway_metrics import metrics_text
from sglang_fair.dashboard.history import History
from sglang_fair.dashboard.model import merge_rows, page_data
from sglang_fair.dashboard.page import DATA_PATH, NO_STORE, PAGE_PATH, page_html
from sglang_fair.dashboard.status import StatusBook, StatusMiddleware
from sglang_fair.edge.identity import Unauthorized, resolve_client
from sglang_fair.gateway.intake import error
from sglang_fair.gateway.metrics_sum import over_unix_socket, whole

if TYPE_CHECKING:
    from sglang_fair.gateway.app import Gateway


class GatewayPage:
    """The page's state at the gateway (one event loop: no locking)."""

    def __init__(self, gateway: Gateway, history: History | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.gateway, self.clock = gateway, clock
        self.history = history or History()
        self.book = StatusBook()
        self.answers: dict[str, dict[str, Any]] = {}  # server URL -> its last page data
        self.stale: dict[str, str] = {}  # server URL -> why its figures are not fresh

    async def poll(self) -> None:
        """Ask every server for its figures now (concurrently, each within ``--health-timeout``)."""
        upstream = self.gateway.upstream
        if upstream is None:
            return
        path = DATA_PATH + "?series=0"
        timeout = self.gateway.config.health_timeout
        urls = [s.url for s in self.gateway.table.servers]
        results = await asyncio.gather(*(asyncio.wait_for(upstream.get_json(u, path), timeout) for u in urls),
                                       return_exceptions=True)
        for url, result in zip(urls, results, strict=True):
            if isinstance(result, dict):
                self.answers[url] = result
                self.stale.pop(url, None)
            else:
                self.stale[url] = str(result) or type(result).__name__

    async def run(self) -> None:
        """Poll and sample every ``interval_s`` until cancelled."""
        while True:
            try:
                await self.poll()
                self.history.add(self.clock(), merge_rows(self.answers))
            except Exception as err:  # one bad answer must not end the sampling
                self.stale["sampler"] = repr(err)
            await asyncio.sleep(self.history.interval_s)

    def policy(self) -> str | None:
        policies = {a.get("policy") for a in self.answers.values()}
        return policies.pop() if len(policies) == 1 else (", ".join(sorted(map(str, policies))) or None)

    def bound(self) -> dict[str, Any]:
        params = [a["params"] for a in self.answers.values() if "params" in a]
        if not params:
            return {"value": None, "formula": "no server has answered yet", "source": None}
        p = params[0]
        return stated_bound(self.policy(), p["quantum"], p["w_e"], p["w_q"], p["context_len"],
                            len(self.gateway.table), self.gateway.router.policy.name)

    def gap(self) -> dict[str, Any]:
        merged = merge_rows(self.answers)
        return self.history.gap({c: float(f.get("weight") or 1.0) for c, f in merged.items()})

    def workers(self) -> list[dict[str, Any]]:
        out, router = self.gateway.supervisor.health.out, self.gateway.router
        rows = []
        for w in self.gateway.table:
            url, queue = w.server.url, router.policy.queue[w.index]
            why = out.get(url) or (f"figures stale: {self.stale[url]}" if url in self.stale else None)
            state = "out" if url in out else ("serving" if queue else "idle")
            rows.append({"name": f"{url} rank {w.rank}", "server": url, "rank": w.rank, "queue": queue,
                         "state": state, "why": why, "routed": router.routed[w.index],
                         "finished": router.finished[w.index]})
        return rows

    def fairness(self, allowed: set[str] | None) -> dict[str, Any]:
        merged = merge_rows(self.answers)
        clients = merged if allowed is None else {c: f for c, f in merged.items() if c in allowed}
        return {"policy": self.policy(), "servers": len(self.answers), "stale": dict(self.stale),
                "clients": clients}

    def data(self, allowed: set[str] | None) -> dict[str, Any]:
        inflight = dict(self.gateway.router.clients.inflight)
        out = page_data("gateway", self.policy(), self.history, self.clock(), merge_rows(self.answers),
                        self.book.view(), self.workers(), self.bound(), in_flight=inflight, allowed=allowed)
        return {**out, "stale": dict(self.stale)}

    def allowed(self, headers: Mapping[str, str]) -> set[str] | None:
        """The clients a caller may read (None: all); raises ``Unauthorized`` without a valid key."""
        edge = self.gateway.config.edge
        keys = self.gateway.tenants.live.table  # the tenant file in force (reloaded)
        client = resolve_client(headers, None, keys, edge.client_header)
        if not keys.enabled or client in edge.admins():
            return None
        return {client}


async def scrape(page: GatewayPage, request: Request) -> Response:
    """``/metrics``: this process's, or with ``--workers N`` on the shared port (not ``?process=self``)
    every process's merged (``gateway/metrics_sum.py``)."""
    own, process = metrics_text(page), page.gateway.process
    if not (process is None or process.count == 1 or over_unix_socket(request.scope)
            or request.query_params.get("process") == "self"):
        headers = {k.lower(): v for k, v in request.headers.items()}
        own = await whole(own, process.index, process.socket, process.count, headers)
    return Response(own, media_type="text/plain")


def mount(app: Any, gateway: Gateway) -> GatewayPage:
    """Add ``/fairness``, ``/fairness/ui``, ``/fairness/ui/data``, ``/metrics`` and the status counter
    to the gateway's app; the caller runs :meth:`GatewayPage.run` in its lifespan."""
    page = GatewayPage(gateway)

    def guarded(answer: Callable[[set[str] | None, Request], Any], admin_only: bool = False) -> Any:
        async def endpoint(request: Request) -> Any:
            headers = {k.lower(): v for k, v in request.headers.items()}
            try:
                allowed = page.allowed(headers)
            except Unauthorized as err:
                return error(401, "Unauthorized", str(err), {"www-authenticate": "Bearer"})
            if admin_only and allowed is not None:
                why = "/metrics needs a key of a --fairness-admins client"
                return error(403, "Forbidden", why)
            answered = answer(allowed, request)
            return await answered if inspect.isawaitable(answered) else answered
        return endpoint

    async def page_endpoint() -> Response:
        return Response(page_html(), media_type="text/html; charset=utf-8", headers=NO_STORE)

    app.add_api_route("/fairness", guarded(lambda allowed, _: page.fairness(allowed)), methods=["GET"])
    app.add_api_route(PAGE_PATH, page_endpoint, methods=["GET"])
    app.add_api_route(DATA_PATH, guarded(lambda allowed, _: page.data(allowed)), methods=["GET"])
    app.add_api_route("/metrics", guarded(lambda _, request: scrape(page, request), admin_only=True),
                      methods=["GET"])
    app.add_middleware(StatusMiddleware, book=page.book)
    app.state.fairness_page = page
    return page
