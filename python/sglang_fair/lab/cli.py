"""``sglang-fair lab``: the subcommand that runs :mod:`sglang_fair.lab.registry`'s labs."""

from __future__ import annotations

import argparse
from typing import Any

from sglang_fair.lab import registry


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "lab", add_help=False, help="run a benchmark, comparison, probe or report (no NAME: the list)",
        description=registry.listing())
    parser.add_argument("name", nargs="?")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    parser.set_defaults(func=_run, pass_through=True)  # `lab --list`, `lab --help`: an option before NAME


def _run(args: argparse.Namespace) -> int:
    before = list(getattr(args, "sglang_args", []))
    return registry.main([*before, args.name, *args.args] if args.name else before)
