"""Starting ``sglang-fair gateway``: discover the servers, build the gateway over them, serve."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

import uvicorn

from sglang_fair.core.errors import ConfigError
from sglang_fair.edge.budgets import BudgetBook
from sglang_fair.gateway.app import Gateway
from sglang_fair.gateway.config import GatewayConfig
from sglang_fair.gateway.duties import EXIT_DUTY_FAILED
from sglang_fair.gateway.feedback import FeedbackListener, Liveness, sources, wait_first_beats
from sglang_fair.gateway.front import make_app
from sglang_fair.gateway.local_tokens import local_tokenizer
from sglang_fair.gateway.peers import Siblings
from sglang_fair.gateway.plumbing import fast_plumbing
from sglang_fair.gateway.processes import EXIT_PROCESS_FAILED, ProcessView, http_socket, supervise
from sglang_fair.gateway.replication import Replication, peer_link
from sglang_fair.gateway.routing import GatewayRouter
from sglang_fair.gateway.servers import WorkerTable, discover
from sglang_fair.gateway.upstream import Upstream, make_pool
from sglang_fair.routing import make_routing_policy

ANSWER_TIMEOUT_S = 30.0  # one /server_info try at start-up, once connected
GC_YOUNG = 10_000  # container objects allocated (net) between young collections; Python's default is 700


async def discover_servers(config: GatewayConfig) -> WorkerTable:
    """Ask every server of ``--worker-urls`` what it serves, waiting for those not up yet (a
    ``ConfigError`` if one stays silent for ``--discovery-timeout`` or they disagree)."""
    answer_within = min(config.discovery_timeout, ANSWER_TIMEOUT_S)
    async with make_pool(answer_within, config.connect_timeout) as pool:
        upstream = Upstream(pool, config.edge.client_header, config.edge.gateway_token)
        return await discover(config.urls(), upstream.get_json, config.discovery_timeout,
                              report=lambda line: print(f"sglang-fair gateway: {line}", flush=True))


def build_gateway(config: GatewayConfig, table: WorkerTable, siblings: Siblings | None = None) -> Gateway:
    """The gateway over ``table``: one router owning the configured routing policy (one global tree
    for all workers) and announcing on the replica link (if any: ``--peer-port``, or the other
    processes of ``--workers``, ``siblings``), hearing the feedback ports of the servers that have one."""
    link = peer_link(config, table, siblings)
    router = GatewayRouter(make_routing_policy(config.routing(len(table))), table,
                           config.edge.client_max_inflight, config.edge.idle_ttl(), peers=link,
                           budgets=BudgetBook(config.edge.key_table.budgets))
    listener = None
    if sources(table):
        heard = [w.index for w in table if w.server.feedback_endpoint]
        liveness = Liveness(heard, config.heartbeat_timeout, config.stall_timeout, time.monotonic())
        listener = FeedbackListener(table, config.curve_keys, router.evicted, liveness, on_load=router.loaded)
    local = local_tokenizer(config.tokenizer, table.servers)
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


class Server(uvicorn.Server):
    """uvicorn's server, calling ``on_started`` once it listens."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] = lambda: None) -> None:
        super().__init__(config)
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            settle_gc()
            self.on_started()


def settle_gc() -> None:
    """The collector, once the gateway serves: what start-up built is frozen (it lives as long as the
    process; no full collection walks it again), and a young collection waits for :data:`GC_YOUNG`
    new objects. With Python's 700 the requests in flight alone (64 at saturation, each some dozens of
    dicts, lists, futures and frames) set off a collection every few chats, each walking them all:
    3-5% of the gateway's CPU at saturation (``sglang-fair lab gateway-speed``), now about nothing."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])


def run_gateway(config: GatewayConfig, siblings: Siblings | None = None, process: ProcessView | None = None,
                sockets: list[socket.socket] | None = None, on_started: Callable[[], None] = lambda: None
                ) -> int:
    """Discover the servers, hear every feedback port once, then serve (on ``sockets`` if given, else
    on ``--host:--port``) until interrupted (0), or until a background duty keeps failing
    (:data:`~sglang_fair.gateway.duties.EXIT_DUTY_FAILED`)."""
    table = asyncio.run(discover_servers(config))
    wait_first_beats(table, config.curve_keys, config.feedback_timeout)
    gateway = build_gateway(config, table, siblings)
    gateway.process = process
    plumbing, settings = fast_plumbing()
    server = Server(uvicorn.Config(make_app(gateway), host=config.host, port=config.port,
                                   log_level="warning", access_log=False, **settings), on_started)

    def give_up(duty: str) -> None:
        server.should_exit = True

    gateway.duties.on_give_up = give_up
    if process is None:
        print(f"{ready_line(config, table)} ({plumbing})", flush=True)
    server.run(sockets)
    if gateway.duties.given_up:
        print(f"sglang-fair gateway: background duty {gateway.duties.given_up[0]!r} kept failing: exiting "
              f"with status {EXIT_DUTY_FAILED} for the supervisor to restart the gateway", file=sys.stderr,
              flush=True)
        return EXIT_DUTY_FAILED
    return 0


def serve(config: GatewayConfig) -> int:
    """``sglang-fair gateway``: one process, or ``--workers`` under a parent (``processes.py``)."""
    if config.processes.workers > 1:
        return supervise(config, serve_child)
    return run_gateway(config)


def serve_child(config: GatewayConfig, index: int, shared: socket.socket, directory: str, ready: Any,
                restarts: Any) -> None:
    """One process of ``--workers N`` (spawned by ``processes.Supervisor``): the gateway on the shared
    listening socket and on its own ``DIRECTORY/http-INDEX.sock``, its replica link to the others;
    says "ready" on ``ready`` once it listens; exits with the gateway's status."""
    own_group_and_parent_death()
    siblings = Siblings(directory, index, config.processes.workers)
    path = http_socket(directory, index)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    own.bind(path)
    own.listen(64)
    view = ProcessView(index, config.processes.workers, os.getpid(), path, restarts)

    def started() -> None:
        ready.send("ready")
        ready.close()

    print(f"sglang-fair gateway: process {index} (pid {os.getpid()}) starting", flush=True)
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # uvicorn raises it again once it has drained
    try:
        sys.exit(run_gateway(config, siblings, view, [shared, own], started))
    except ConfigError as err:
        print(f"sglang-fair gateway: process {index}: error: {err}", file=sys.stderr, flush=True)
        sys.exit(2)
    finally:
        if os.getppid() != parent:  # the parent was killed: leave no files (the last one the directory)
            for name in (path, os.path.join(directory, f"peer-{index}")):
                with contextlib.suppress(OSError):
                    os.unlink(name)
            with contextlib.suppress(OSError):
                os.rmdir(directory)


def own_group_and_parent_death() -> None:
    """Leave the parent's process group (a terminal's Ctrl-C reaches the parent alone, which stops the
    children in order) and get SIGTERM if the parent dies (Linux)."""
    os.setpgrp()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before prctl
        sys.exit(EXIT_PROCESS_FAILED)
