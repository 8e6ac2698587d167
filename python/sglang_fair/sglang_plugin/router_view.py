"""``GET /fairness/router`` on ``serve``'s main port: the global router's ``/state``, no extra port.

The router rewrites its view every half second into the link's directory (``--router-state-file``,
set by ``serve``); the HTTP process answers it here. With ``--client-keys`` only a
``--fairness-admins`` key may read it (``edge/admins.py``): it names every client. Its fields:
docs/guides/deploy.md, "The router". ``--router-http-port`` still serves ``/state`` and ``/metrics`` on a
port of their own (for Prometheus without a key).
"""

from __future__ import annotations

import json
from typing import Any

from sglang_fair.edge.errors import error_body
from sglang_fair.sglang_plugin.router_link import RouterLink

ROUTER_PATH = "/fairness/router"
NO_ROUTER = ("no global router runs on this server: `sglang-fair serve --dp-size N` (N >= 2) starts one "
             "unless --load-balance-method names one of SGLang's own methods")


def router_view(link: RouterLink | None) -> tuple[int, dict[str, Any]]:
    """(status, body) of ``GET /fairness/router``: the router's last view, 404 when none runs, 503
    before its first view is written."""
    if link is None:
        return 404, error_body(404, "NotFound", NO_ROUTER)
    try:
        with open(link.state_file) as view:
            state: dict[str, Any] = json.load(view)
    except (OSError, ValueError):
        return 503, error_body(503, "Unavailable", "the router has not published its state yet; retry")
    return 200, state


def make_router_endpoint(link: RouterLink | None) -> Any:
    from starlette.responses import JSONResponse

    async def router_endpoint(request: Any) -> Any:
        status, body = router_view(link)
        return JSONResponse(body, status_code=status)

    return router_endpoint
