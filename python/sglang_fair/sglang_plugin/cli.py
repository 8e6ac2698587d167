"""``sglang-fair serve``: SGLang's server with the sglang-fair plugin, fair by default.

The project's flags come from :class:`FairConfig` and :class:`RouterSettings` (listed by
``--help``); every other argument is handed to SGLang's own parser unchanged, e.g.
``sglang-fair serve --model-path M --schedule-policy dlpm --fair-quantum 2048``.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from sglang_fair.sglang_plugin.config import add_config_flags, build_config
from sglang_fair.sglang_plugin.defaults import defaults_summary
from sglang_fair.sglang_plugin.router_link import ROUTER_METHODS, add_router_flags, router_settings

EPILOG = "\n\n".join(textwrap.fill(paragraph, 79, break_on_hyphens=False) for paragraph in (
    defaults_summary(),
    "SGLang's own flags (python -m sglang.launch_server --help) all pass through unchanged; "
    "--schedule-policy also accepts dlpm, dlpm_light and vtc (weighted with --client-weights or a "
    "weight column in --client-keys). With --dp-size N >= 2, --load-balance-method also accepts "
    f"{', '.join(ROUTER_METHODS)}: the global router (sglang_fair_router) then routes every request; "
    "the --router-* flags configure it.",
    "Every flag: docs/reference/flags.md. [3]: FairBatching, arXiv:2510.14392.",
))


def register(subparsers: Any) -> None:
    """Add the ``serve`` subcommand; ``pass_through`` makes the CLI hand unknown flags to SGLang."""
    parser = subparsers.add_parser(
        "serve", help="run SGLang's server with fair scheduling", description=__doc__.splitlines()[0],
        epilog=EPILOG, allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_flags(parser)
    add_router_flags(parser)
    parser.set_defaults(func=serve, pass_through=True)


def serve(args: argparse.Namespace) -> int:
    """Validate the project's flags, then run SGLang (imported only now)."""
    values = {k: getattr(args, k) for k in vars(args)
              if k not in ("func", "command", "sglang_args", "pass_through")}
    config = build_config(values)
    settings = router_settings(args)
    from sglang_fair.sglang_plugin.launcher import run

    return run(config, args.sglang_args, settings)
