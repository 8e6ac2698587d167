"""``sglang-fair gateway``: one OpenAI-compatible endpoint in front of several ``sglang-fair serve``.

``sglang-fair gateway --worker-urls http://HOST:PORT,... [--port P] [--router-policy NAME]`` routes
every request to a (server, DP rank) with one routing policy over all their workers and pins the
rank, so each server's own router does not route it again. Needs the ``gateway`` extra.
``sglang-fair keys DIR`` makes the CurveZMQ keys of the servers' feedback ports (``curve.py``).
"""

from __future__ import annotations

import argparse
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.gateway.config import add_gateway_flags, gateway_config
from sglang_fair.links.curve import GATEWAY, make_keys


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
    keys = subparsers.add_parser(
        "keys", help="make the CurveZMQ keys of the servers' feedback ports",
        description="Write the fleet's server key pair and one pair per gateway into DIR (ZeroMQ "
                    "certificate files): servers take --feedback-keys DIR with server.key_secret and the "
                    "gateway*.key files, gateways --feedback-keys DIR with their .key_secret and server.key.",
        allow_abbrev=False,
    )
    keys.add_argument("directory", metavar="DIR", help="where to write the keys (refuses to overwrite)")
    keys.add_argument("--gateway-names", default=GATEWAY,
                      help="comma-separated names of the gateways' key pairs, each starting with 'gateway' "
                           "(default: gateway)")
    keys.set_defaults(func=write_keys)


def write_keys(args: argparse.Namespace) -> int:
    names = [n.strip() for n in str(args.gateway_names).split(",") if n.strip()]
    for path in make_keys(args.directory, names):
        print(path)
    return 0


def run(args: argparse.Namespace) -> int:
    """Validate the flags, then discover the servers and serve (the extra is imported only now)."""
    config = gateway_config(args)
    try:
        from sglang_fair.gateway.launch import serve
    except ModuleNotFoundError as err:
        raise ConfigError(f"the gateway needs the 'gateway' extra ({err}): pip install 'sglang-fair[gateway]'"
                          ) from None
    if config.ext_proc.port:
        try:
            import sglang_fair.gateway.epp_front  # noqa: F401 (grpc, protobuf)
        except ModuleNotFoundError as err:
            raise ConfigError(f"--ext-proc-port needs the 'epp' extra ({err}): pip install "
                              "'sglang-fair[gateway,epp]'") from None
    return serve(config)
