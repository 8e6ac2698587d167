"""The fairness page in ``serve``'s HTTP process: ``GET /fairness/ui`` (the page) and
``GET /fairness/ui/data`` (its data, :mod:`sglang_fair.dashboard.model`), installed by
``http_hooks.install_http``.

A daemon thread samples the schedulers' published figures (``publish.read_all``, what ``/fairness``
answers) every ``interval_s`` into a :class:`History`. Workers come from the schedulers' files: a
worker's queue is its clients' waiting and running requests; it is ``serving`` while it publishes,
``idle`` with nothing queued, ``stalled`` when it has requests but has published no step for
``STALL_S`` seconds (a scheduler publishes after every step while busy, at most every 0.1 s).

Access is ``/fairness``'s: the page itself holds no figures and needs no key (it asks for one when the
data answers 401); the data needs a key when keys are configured, and shows that key's client only
unless the key is a ``--fairness-admins`` client's or the caller holds the gateway's token.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sglang_fair.dashboard.bound import quantum_of, stated_bound
from sglang_fair.dashboard.history import History
from sglang_fair.dashboard.model import page_data
from sglang_fair.dashboard.page import DATA_PATH, NO_STORE, PAGE_PATH, page_html
from sglang_fair.dashboard.status import StatusBook, StatusMiddleware
from sglang_fair.edge.identity import SCOPE_KEY
from sglang_fair.edge.trust import TRUST_KEY
from sglang_fair.sglang_plugin.config import FairConfig
from sglang_fair.sglang_plugin.publish import read_all, state_dir
from sglang_fair.sglang_plugin.router_link import link_from_env

STALL_S = 30.0


def scheduler_workers(directory: Path | None, now: float) -> list[dict[str, Any]]:
    """One row per scheduler file (``now``: wall-clock seconds, compared with the files' times)."""
    rows = []
    for path in sorted(directory.glob("scheduler-*.json")) if directory else []:
        try:
            data, written = json.loads(path.read_text()), path.stat().st_mtime
        except (OSError, ValueError):
            continue
        clients = data.get("clients", {}).values()
        waiting = sum(int(c.get("waiting") or 0) for c in clients)
        queue = waiting + sum(int(c.get("running") or 0) for c in clients)
        age = max(0.0, now - written)
        state, why = ("idle", None) if queue == 0 else ("serving", None)
        if queue and age > STALL_S:
            state, why = "stalled", f"no step published for {age:.0f} s with {queue} requests"
        rows.append({"name": f"worker {path.stem.split('-', 1)[1]}", "queue": queue, "waiting": waiting,
                     "state": state, "why": why, "age_s": round(age, 1)})
    return rows


class ServePage:
    """The page's state in ``serve``'s HTTP process (time passed in through ``clock``/``wall``)."""

    def __init__(self, config: FairConfig, directory: Path | None, policy_args: dict[str, Any],
                 context_len: Callable[[], int | None], history: History | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.config, self.directory, self.policy_args = config, directory, policy_args
        self.context_len, self.clock, self.wall = context_len, clock, wall
        self.history = history or History()
        self.book = StatusBook()

    def sample(self) -> None:
        self.history.add(self.clock(), read_all(self.directory)["clients"])

    def params(self, policy: str | None, published: float | None = None) -> dict[str, Any]:
        """What the bound is computed from (the gateway reads it too); Q^u is the largest the schedulers
        published (a quantum in time is measured there), else the configured one."""
        cost = self.config.cost()
        admission = self.config.admission
        quantum = published or quantum_of(policy or "", admission.quantum, admission.quantum_s)
        return {"policy": policy, "quantum": quantum,
                "w_e": cost.w_e, "w_q": cost.w_q, "context_len": self.context_len(),
                "workers": int(self.policy_args.get("dp_size") or 1),
                "router": self.policy_args.get("router")}

    def allowed(self, scope: dict[str, Any]) -> set[str] | None:
        """The clients the caller may read (None: every client), as ``/fairness`` decides."""
        state = scope.get("state") or {}
        client = state.get(SCOPE_KEY)
        if not self.config.edge.key_table.enabled or client in self.config.admins() or state.get(TRUST_KEY):
            return None
        return {client} if client else set()

    def data(self, allowed: set[str] | None, series: bool = True) -> dict[str, Any]:
        everything = read_all(self.directory)
        p = self.params(everything["policy"], everything.get("quantum"))
        bound = stated_bound(p["policy"], p["quantum"], p["w_e"], p["w_q"], p["context_len"], p["workers"],
                             p["router"])
        history = self.history if series else History(self.history.window_s, self.history.interval_s)
        out = page_data("serve", everything["policy"], history, self.clock(), everything["clients"],
                        self.book.view(), scheduler_workers(self.directory, self.wall()), bound,
                        allowed=allowed)
        return {**out, "params": p}


def page_for_server(server_args: Any, config: FairConfig) -> ServePage:
    """The page of the server SGLang is about to launch with ``server_args``."""
    dp_size = int(getattr(server_args, "dp_size", 1) or 1)
    link = link_from_env()
    router = (link.policy or None) if link is not None else getattr(server_args, "load_balance_method", None)
    return ServePage(config, state_dir(), {"dp_size": dp_size, "router": router}, served_context_len)


def served_context_len() -> int | None:
    """The model's context length, from SGLang's tokenizer manager (None before it is set up)."""
    from sglang.srt.entrypoints import http_server

    manager = getattr(http_server.get_global_state(), "tokenizer_manager", None)
    value = getattr(manager, "context_len", None)
    return int(value) if isinstance(value, int) else None


def sample_forever(page: ServePage, stop: threading.Event) -> None:
    while not stop.wait(page.history.interval_s):
        try:
            page.sample()
        except Exception:  # a half-written file or a race with shutdown: the next sample tries again
            continue


def install(app: Any, page: ServePage) -> threading.Event:
    """Add the page's routes and the status counter to SGLang's ``app``; start sampling (set the
    returned event to stop)."""
    from starlette.responses import JSONResponse, Response

    async def page_endpoint(request: Any) -> Any:
        return Response(page_html(), media_type="text/html; charset=utf-8", headers=NO_STORE)

    async def data_endpoint(request: Any) -> Any:
        series = request.query_params.get("series", "1") != "0"
        return JSONResponse(page.data(page.allowed(request.scope), series), headers=NO_STORE)

    app.add_route(PAGE_PATH, page_endpoint, methods=["GET"])
    app.add_route(DATA_PATH, data_endpoint, methods=["GET"])
    app.add_middleware(StatusMiddleware, book=page.book)
    stop = threading.Event()
    threading.Thread(target=sample_forever, args=(page, stop), daemon=True, name="sglang-fair-page").start()
    return stop
