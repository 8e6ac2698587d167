"""Starting ``sglang-fair gateway``: discover the servers, build the gateway over them, serve."""

from __future__ import annotations

import asyncio
import sys
import time

import uvicorn

from sglang_fair.edge.budgets import BudgetBook
from sglang_fair.gateway.app import Gateway, make_app
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.duties import EXIT_DUTY_FAILED
from sglang_fair.gateway.feedback import FeedbackListener, Liveness, sources, wait_first_beats
from sglang_fair.gateway.local_tokens import LocalTokenizer
from sglang_fair.gateway.plumbing import fast_plumbing
from sglang_fair.gateway.replication import Replication, peer_link
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import WorkerTable, discover
from sglang_fair.gateway.upstream import Upstream, make_session
from sglang_fair.routing import make_routing_policy

ANSWER_TIMEOUT_S = 30.0  # one /server_info try at start-up, once connected


async def discover_servers(config: GatewayConfig) -> WorkerTable:
    """Ask every server of ``--worker-urls`` what it serves, waiting for those not up yet (a
    ``ConfigError`` if one stays silent for ``--discovery-timeout`` or they disagree)."""
    answer_within = min(config.discovery_timeout, ANSWER_TIMEOUT_S)
    async with make_session(answer_within, config.connect_timeout) as session:
        upstream = Upstream(session, config.edge.client_header, config.edge.gateway_token)
        return await discover(config.urls(), upstream.get_json, config.discovery_timeout,
                              report=lambda line: print(f"sglang-fair gateway: {line}", flush=True))


def build_gateway(config: GatewayConfig, table: WorkerTable) -> Gateway:
    """The gateway over ``table``: one router owning the configured routing policy (one global tree
    for all workers) and announcing on the replica link (if any), hearing the feedback ports of the
    servers that have one."""
    link = peer_link(config, table)
    router = GatewayRouter(make_routing_policy(config.routing(len(table))), table,
                           config.edge.client_max_inflight, config.edge.idle_ttl(), peers=link,
                           budgets=BudgetBook(config.edge.key_table.budgets))
    listener = None
    if sources(table):
        heard = [w.index for w in table if w.server.feedback_endpoint]
        liveness = Liveness(heard, config.heartbeat_timeout, config.stall_timeout, time.monotonic())
        listener = FeedbackListener(table, config.curve_keys, router.evicted, liveness, on_load=router.loaded)
    local = LocalTokenizer(config.tokenizer) if config.tokenizer else None
    return Gateway(config, table, router, listener, Replication(link, router) if link is not None else None,
                   local)


def counted(n: int, noun: str) -> str:
    """``1 server``, ``2 servers``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def ready_line(config: GatewayConfig, table: WorkerTable) -> str:
    """The one line that says the gateway is up: what it routes over, how, and where."""
    return (f"sglang-fair gateway: ready on http://{config.host}:{config.port}: "
            f"{counted(len(table.servers), 'server')} of {table.model!r}, {counted(len(table), 'worker')}, "
            f"routing {config.router.policy}")


def serve(config: GatewayConfig) -> int:
    """Discover the servers, hear every feedback port once, then serve until interrupted (0), or until
    a background duty keeps failing (:data:`~sglang_fair.gateway.duties.EXIT_DUTY_FAILED`)."""
    table = asyncio.run(discover_servers(config))
    wait_first_beats(table, config.curve_keys, config.feedback_timeout)
    gateway = build_gateway(config, table)
    plumbing, settings = fast_plumbing()
    server = uvicorn.Server(uvicorn.Config(make_app(gateway), host=config.host, port=config.port,
                                           log_level="warning", access_log=False, **settings))

    def give_up(duty: str) -> None:
        server.should_exit = True

    gateway.duties.on_give_up = give_up
    print(f"{ready_line(config, table)} ({plumbing})", flush=True)
    server.run()
    if gateway.duties.given_up:
        print(f"sglang-fair gateway: background duty {gateway.duties.given_up[0]!r} kept failing: exiting "
              f"with status {EXIT_DUTY_FAILED} for the supervisor to restart the gateway", file=sys.stderr,
              flush=True)
        return EXIT_DUTY_FAILED
    return 0
