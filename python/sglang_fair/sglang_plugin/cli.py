"""``sglang-fair serve``: SGLang's server with the sglang-fair plugin; every SGLang flag passes through.

The project's flags come from :class:`FairConfig` (listed by ``--help``); every other argument is
handed to SGLang's own parser unchanged, e.g.
``sglang-fair serve --model-path M --schedule-policy dlpm --fair-quantum 2048``.
"""

from __future__ import annotations

import argparse
from typing import Any

from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.sglang_plugin.config import FairConfig, build_config
from sglang_fair.sglang_plugin.router_link import ROUTER_METHODS, RouterFlags

EPILOG = (
    "All other arguments are SGLang's (python -m sglang.launch_server --help), passed through "
    "unchanged; --schedule-policy also accepts dlpm, dlpm_light and vtc (weighted with --client-weights or a "
    "weight column in --client-keys). With --dp-size N >= 2, --load-balance-method also accepts "
    f"{', '.join(ROUTER_METHODS)}: the global router (sglang_fair_router) then routes every request; "
    "the --router-* flags configure it."
)


def register(subparsers: Any) -> None:
    """Add the ``serve`` subcommand; ``pass_through`` makes the CLI hand unknown flags to SGLang."""
    parser = subparsers.add_parser(
        "serve", help="run SGLang's server with fair scheduling", description=__doc__.splitlines()[0],
        epilog=EPILOG, allow_abbrev=False,
    )
    add_flags(parser, FairConfig)
    add_flags(parser, RouterFlags)
    parser.set_defaults(func=serve, pass_through=True)


def serve(args: argparse.Namespace) -> int:
    """Validate the project's flags, then run SGLang (imported only now)."""
    values = {k: getattr(args, k) for k in vars(args)
              if k not in ("func", "command", "sglang_args", "pass_through")}
    config = build_config(values)
    router_flags = from_flags(RouterFlags, args)
    from sglang_fair.sglang_plugin.launcher import run

    return run(config, args.sglang_args, router_flags)
