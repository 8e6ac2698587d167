"""``sglang-fair router``: run the global fair router process."""

from __future__ import annotations

import argparse
import logging
import signal

from sglang_fair.core.cost import CostModel
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.edge.reload import TenantReloader
from sglang_fair.routing import RouterConfig, RoutingPolicy, make_routing_policy
from sglang_fair_router.config import ServiceConfig


def build(args: argparse.Namespace) -> tuple[ServiceConfig, RoutingPolicy, TenantReloader | None]:
    """The service's config, the routing policy and the tenant file's reloader (None without
    ``--router-client-keys``) that the flags describe; an invalid tenant file is a :class:`ConfigError`
    here, before anything binds."""
    from sglang_fair_router.tenants import start_cost, weights_reloader

    service_cfg = from_flags(ServiceConfig, args)
    service_cfg.require_endpoints()
    flag_cost = cost = from_flags(CostModel, args)
    path, table = service_cfg.client_keys, None
    if path:
        cost, table = start_cost(flag_cost, path)
    routing = from_flags(RouterConfig, args, num_workers=len(service_cfg.worker_endpoints()), cost=cost)
    policy = make_routing_policy(routing)
    tenants = None if table is None else weights_reloader(path, table, flag_cost.client_weights, policy)
    return service_cfg, policy, tenants


def main(args: argparse.Namespace) -> int:
    from sglang_fair_router.http import serve_state
    from sglang_fair_router.service import RouterService

    service_cfg, policy, tenants = build(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    service = RouterService(service_cfg, policy, tenants=tenants)
    if service_cfg.http_port:
        serve_state(service_cfg.http_port, lambda: service.snapshot, service_cfg.http_host)
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    if tenants is not None:
        signal.signal(signal.SIGHUP, lambda *_: tenants.request())  # looked at by the loop's next check
    logging.getLogger("sglang_fair.router").info(
        "routing with %s over %d workers", policy.name, len(policy.workers))
    try:
        service.serve_forever()
    except KeyboardInterrupt:
        service.close()
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("router", help="run the global fair router (ZMQ)",
                                   description=__doc__)
    add_flags(parser, ServiceConfig)
    add_flags(parser, RouterConfig, skip=("num_workers",))
    add_flags(parser, CostModel)
    parser.set_defaults(func=main)
