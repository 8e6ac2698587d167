"""``sglang-fair router``: run the global fair router process."""

from __future__ import annotations

import argparse
import logging
import signal

from sglang_fair.core.cost import CostModel
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.routing import RouterConfig, make_routing_policy


def main(args: argparse.Namespace) -> int:
    from sglang_fair_router.config import ServiceConfig
    from sglang_fair_router.http import serve_state
    from sglang_fair_router.service import RouterService

    service_cfg = from_flags(ServiceConfig, args)
    service_cfg.require_endpoints()
    routing = from_flags(RouterConfig, args, num_workers=len(service_cfg.worker_endpoints()),
                         cost=from_flags(CostModel, args))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    service = RouterService(service_cfg, make_routing_policy(routing))
    if service_cfg.http_port:
        serve_state(service_cfg.http_port, lambda: service.snapshot, service_cfg.http_host)
    signal.signal(signal.SIGTERM, lambda *_: service.stop())
    logging.getLogger("sglang_fair.router").info(
        "routing with %s over %d workers", routing.policy, routing.num_workers)
    try:
        service.serve_forever()
    except KeyboardInterrupt:
        service.close()
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from sglang_fair_router.config import ServiceConfig

    parser = subparsers.add_parser("router", help="run the global fair router (ZMQ)",
                                   description=__doc__)
    add_flags(parser, ServiceConfig)
    add_flags(parser, RouterConfig, skip=("num_workers",))
    add_flags(parser, CostModel)
    parser.set_defaults(func=main)
