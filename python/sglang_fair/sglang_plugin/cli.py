"""``sglang-fair serve``: SGLang's server with the sglang-fair plugin, fair by default.

The project's flags come from :class:`FairConfig` and :class:`RouterSettings` (listed by
``--help``); every other argument is handed to SGLang's own parser unchanged, e.g.
``sglang-fair serve --model-path M --schedule-policy dlpm --fair-quantum 2048``.
"""

from __future__ import annotations

import argparse
from typing import Any

from sglang_fair.sglang_plugin.config import add_config_flags, build_config
from sglang_fair.sglang_plugin.defaults import DEFAULT_ADMISSION, DEFAULT_ROUTER
from sglang_fair.sglang_plugin.router_link import ROUTER_METHODS, add_router_flags, router_settings

EPILOG = (
    f"Defaults: with no --schedule-policy the schedulers run {DEFAULT_ADMISSION} (fair per client; "
    "--schedule-policy fcfs or lpm gives back plain SGLang); with --dp-size N >= 2 and no "
    f"--load-balance-method the global router runs {DEFAULT_ROUTER}. An SGLang feature the fair policies "
    "do not serve (LoRA, pipeline parallelism, disaggregation, priority scheduling) turns a default back "
    "to SGLang's own, with a notice. "
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
