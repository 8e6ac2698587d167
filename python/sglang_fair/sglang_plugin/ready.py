"""The one line ``serve`` prints when it is ready: where, which policies, where to look (``/fairness``,
the fairness page, the router's view).

SGLang's own "The server is fired up and ready to roll!" is an INFO line among many; this one is printed
(stdout, whatever the log level) once SGLang's warm-up succeeded (``http_hooks.wait_and_warmup``).
"""

from __future__ import annotations

from typing import Any

from sglang_fair.dashboard.page import PAGE_PATH
from sglang_fair.sglang_plugin.router_link import RouterLink
from sglang_fair.sglang_plugin.router_view import ROUTER_PATH


def ready_line(server_args: Any, link: RouterLink | None, keys: bool) -> str:
    """``sglang-fair: ready on URL: ...`` for a server of ``server_args`` (``link``: its router, if any;
    ``keys``: ``--client-keys`` given)."""
    url = server_args.url() if callable(getattr(server_args, "url", None)) else (
        f"http://{server_args.host}:{server_args.port}")
    workers = int(getattr(server_args, "dp_size", 1) or 1)
    parts = [f"admission {getattr(server_args, 'schedule_policy', '?')} on "
             f"{workers} worker{'' if workers == 1 else 's'}"]
    if link is not None:
        parts.append(f"routing {link.policy or 'by the global router'} ({url}{ROUTER_PATH})")
    elif workers > 1:
        parts.append(f"routing SGLang's {getattr(server_args, 'load_balance_method', '?')}")
    parts.append(f"per-client figures at {url}/fairness" + (" (with an API key)" if keys else "")
                 + f", the page at {url}{PAGE_PATH}")
    return f"sglang-fair: ready on {url}: " + "; ".join(parts)
