"""The ``sglang-fair`` command line: one subcommand per module, each exposing ``register(subparsers)``.

A subcommand module adds its parser and sets ``func`` (called with the parsed namespace, returning
an exit code); one that sets ``pass_through`` receives the arguments it does not know, in order,
as ``sglang_args`` (``serve`` hands them to SGLang). Modules that need optional extras import them
inside ``func``, so ``--help`` and the base commands work on the base install. Every module is part of
the package: one that cannot be imported means a broken install (e.g. an image built without
``router/``), reported as such with a non-zero exit rather than a subcommand that silently vanishes.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from sglang_fair.core.errors import ConfigError

COMMAND_MODULES = (
    "sglang_fair.demo",
    "sglang_fair.sim.cli",
    "sglang_fair.speed.policies",
    "sglang_fair.speed.simulator",
    "sglang_fair.loadtest.cli",
    "sglang_fair.gateway.cli",
    "sglang_fair.sglang_plugin.cli",
    "sglang_fair.lab.cli",
    "sglang_fair_router.cli",
    "sglang_fair_router.speed",
)


class IncompleteInstall(RuntimeError):
    """A subcommand's module (or a module it imports at the top) is missing from this installation."""


def build_parser() -> argparse.ArgumentParser:
    """The parser with every subcommand of :data:`COMMAND_MODULES`; raises :class:`IncompleteInstall`
    naming each module that cannot be imported."""
    modules: list[ModuleType] = []
    missing: list[str] = []
    for name in COMMAND_MODULES:
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as err:
            missing.append(f"{name} ({err})")
    if missing:
        raise IncompleteInstall(
            "this installation of sglang-fair is incomplete, cannot import: " + "; ".join(missing)
            + ". Reinstall the package (pip install sglang-fair, or pip install -e . in a checkout); "
            "an image must install the wheel built from pyproject.toml, README.md, python/ and router/."
        )
    parser = argparse.ArgumentParser(
        prog="sglang-fair",
        description="Locality-aware fair scheduling (DLPM, D2LPM, VTC) for LLM serving.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in modules:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
    except IncompleteInstall as err:
        print(f"sglang-fair: error: {err}", file=sys.stderr)
        return 1
    args, extra = parser.parse_known_args(argv)
    if extra:  # a subcommand that wraps another program (serve) takes the rest, in order
        if not getattr(args, "pass_through", False):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.sglang_args = extra
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"sglang-fair {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
