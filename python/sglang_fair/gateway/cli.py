"""``sglang-fair gateway``: one OpenAI-compatible endpoint in front of several ``sglang-fair serve``.

``sglang-fair gateway --worker-urls http://HOST:PORT,... [--port P] [--router-policy NAME]`` routes
every request to a (server, DP rank) with one routing policy over all their workers and pins the
rank, so each server's own router does not route it again. Needs the ``gateway`` extra.
"""

from __future__ import annotations

import argparse
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.config import add_gateway_flags, gateway_config


def register(subparsers: Any) -> None:
    """Add the ``gateway`` subcommand."""
    parser = subparsers.add_parser(
        "gateway", help="one endpoint routing over several sglang-fair servers",
        description="One OpenAI-compatible endpoint in front of several sglang-fair serve instances: "
                    "every request goes to a (server, DP rank) chosen by one routing policy over all "
                    "their workers.",
        allow_abbrev=False,
    )
    add_gateway_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the flags, then discover the servers and serve (the extra is imported only now)."""
    config = gateway_config(args)
    try:
        from sglang_fair.gateway.app import serve
    except ModuleNotFoundError as err:
        raise ConfigError(f"the gateway needs the 'gateway' extra ({err}): pip install 'sglang-fair[gateway]'"
                          ) from None
    return serve(config)
