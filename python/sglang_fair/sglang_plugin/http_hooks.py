"""Hooks in the HTTP (tokenizer-manager) process: client identity, ``/fairness``, warm-up window."""

from __future__ import annotations

import logging
from typing import Any

from sglang_fair.sglang_plugin.config import FAIR_POLICIES, config_from_env
from sglang_fair.sglang_plugin.identity import SCOPE_KEY, ClientIdentityMiddleware
from sglang_fair.sglang_plugin.publish import read_all, state_dir
from sglang_fair.sglang_plugin.router_link import link_from_env

logger = logging.getLogger("sglang_fair")
_warmup = {"open": False}


def warmup_open() -> bool:
    """True only while SGLang's own start-up warm-up runs (it cannot send a client key)."""
    return _warmup["open"]


def wait_and_warmup(original: Any, *args: Any, **kwargs: Any) -> Any:
    """AROUND ``http_server._wait_and_warmup``: opens the loopback warm-up window, then closes it."""
    _warmup["open"] = True
    try:
        return original(*args, **kwargs)
    finally:
        _warmup["open"] = False


async def fairness_endpoint() -> dict[str, Any]:
    """``GET /fairness``: per client counter, service (actual and perceived), waiting, running."""
    return read_all(state_dir())


def install_http(*args: Any, **kwargs: Any) -> None:
    """BEFORE ``http_server.launch_server``: add ``/fairness`` and, when a fair policy, client keys
    or the global router are configured, the identity middleware (so installing the package leaves
    SGLang's own policies, and their use of ``routing_key``, untouched)."""
    from sglang.srt.entrypoints import http_server

    app = http_server.app
    if getattr(app.state, "sglang_fair_installed", False):
        return None
    server_args = args[0] if args else kwargs.get("server_args")
    policy = getattr(server_args, "schedule_policy", None)
    config = config_from_env()
    app.add_api_route("/fairness", fairness_endpoint, methods=["GET"])
    app.state.sglang_fair_installed = True
    if policy not in FAIR_POLICIES and not config.key_table.enabled and link_from_env() is None:
        return None
    app.add_middleware(
        ClientIdentityMiddleware, keys=config.key_table, header=config.client_header,
        warmup_open=warmup_open,
    )
    logger.info("sglang-fair: client identity (%s) installed",
                "API keys" if config.key_table.enabled else f"header {config.client_header}")
    return None


def generate_request(
    original: Any, self: Any, obj: Any, request: Any = None, *args: Any, **kwargs: Any
) -> Any:
    """AROUND ``TokenizerManager.generate_request``: the edge's client becomes ``obj.routing_key``.

    Whatever the body or the ``x-smg-routing-key`` header said is overwritten, so a client cannot
    pick its own identity when keys are configured.
    """
    if request is not None:
        state = request.scope.get("state") or {}
        client = state.get(SCOPE_KEY)
        if client:
            obj.routing_key = client
    return original(self, obj, request, *args, **kwargs)


def batch_item(result: Any, self: Any, *args: Any, **kwargs: Any) -> Any:
    """AFTER ``GenerateReqInput.__getitem__``: items of a batch keep the batch's client."""
    if getattr(result, "routing_key", None) is None and getattr(self, "routing_key", None) is not None:
        result.routing_key = self.routing_key
    return result
