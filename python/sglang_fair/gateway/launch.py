"""Starting ``sglang-fair gateway``: discover the servers, build the gateway over them, serve."""

from __future__ import annotations

import asyncio
import time

import uvicorn

from sglang_fair.core.global_tree import WIDTH
from sglang_fair.gateway.app import Gateway, make_app
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.feedback import FeedbackListener, Liveness, sources, wait_first_beats
from sglang_fair.gateway.replication import replicate
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import WorkerTable, discover
from sglang_fair.gateway.upstream import Upstream, make_session
from sglang_fair.routing import make_routing_policy
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.state import load_of

ANSWER_TIMEOUT_S = 30.0  # one /server_info try at start-up, once connected


async def discover_servers(config: GatewayConfig) -> WorkerTable:
    """Ask every server of ``--worker-urls`` what it serves, waiting for those not up yet (a
    ``ConfigError`` if one stays silent for ``--discovery-timeout`` or they disagree)."""
    answer_within = min(config.discovery_timeout, ANSWER_TIMEOUT_S)
    async with make_session(answer_within, config.connect_timeout) as session:
        upstream = Upstream(session, config.client_header, config.token)
        return await discover(config.urls(), upstream.get_json, config.discovery_timeout,
                              report=lambda line: print(f"sglang-fair gateway: {line}", flush=True))


def build_gateway(config: GatewayConfig, table: WorkerTable) -> Gateway:
    """The gateway over ``table`` with the configured routing policy (one global tree for all
    workers), hearing the feedback ports of the servers that have one."""
    policy = make_routing_policy(config.routing(len(table)))
    listener = None
    if sources(table):
        heard = [w.index for w in table if w.server.feedback_endpoint]
        liveness = Liveness(heard, config.heartbeat_timeout, config.stall_timeout, time.monotonic())

        def on_evict(worker: int, tokens: bytes, start: int) -> None:
            policy.on_evict(worker, tokens, min(start, len(tokens) // WIDTH))

        def on_load(worker: int, load: wm.Load) -> None:  # the worker's capacity and service rate
            policy.on_load(worker, load_of(load))

        listener = FeedbackListener(table, config.curve_keys, on_evict, liveness, on_load=on_load)
    router = GatewayRouter(policy, table, config.client_max_inflight, config.idle_ttl())
    return Gateway(config, table, router, listener, replicate(config, table, router))


def serve(config: GatewayConfig) -> int:
    """Discover the servers, hear every feedback port once, then serve until interrupted."""
    table = asyncio.run(discover_servers(config))
    wait_first_beats(table, config.curve_keys, config.feedback_timeout)
    gateway = build_gateway(config, table)
    print(f"sglang-fair gateway: {len(table.servers)} servers of {table.model!r}, {len(table)} workers, "
          f"policy {config.router.policy}, on http://{config.host}:{config.port}", flush=True)
    uvicorn.run(make_app(gateway), host=config.host, port=config.port, log_level="warning")
    return 0
