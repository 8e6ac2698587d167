"""Rewrite the generated blocks of README.md, docs/guides/serve.md and docs/reference/flags.md from the
code they describe.

A block sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``; its text comes
from one source, the same that ``sglang-fair COMMAND --help`` prints:

- ``fair-defaults``: what ``serve`` runs with no policy flag and every SGLang feature that turns a
  default back to SGLang's own (``sglang_plugin/defaults.py``'s ``defaults_summary``);
- ``batch-flags``: the ``--batch-*`` flags of ``serve``, their help and defaults (``BatchingConfig``);
- ``flags-COMMAND`` (serve, gateway, router, sim, keys): every flag of ``sglang-fair COMMAND``, its default
  and its help, from the parser the CLI builds (itself derived from the frozen config dataclasses,
  ``core/flags.py``), so a flag added or a help text changed makes the check fail until regenerated.

    .venv/bin/sglang-fair lab sync-docs          # rewrite the blocks
    .venv/bin/sglang-fair lab sync-docs --check  # exit 1 naming the stale ones (tests/project runs it)
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the checkout whose docs it rewrites
FILES = ("README.md", "docs/guides/serve.md", "docs/reference/flags.md")
COMMANDS = ("serve", "gateway", "router", "sim", "keys")  # docs/reference/flags.md's flags-COMMAND blocks


def fair_defaults() -> str:
    from sglang_fair.sglang_plugin.defaults import defaults_summary

    return defaults_summary(markdown=True)  # one line: a wrapped `--pp-size > 1` could start a quote


@functools.cache
def command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``sglang-fair NAME``, as the CLI builds it."""
    from sglang_fair.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    return commands.choices[name]  # type: ignore[index,no-any-return]


def batch_flags() -> str:
    serve = command_parser("serve")
    rows = ["| flag | meaning | default |", "| --- | --- | --- |"]
    for action in serve._actions:
        flag = next((o for o in action.option_strings if o.startswith("--batch-")), None)
        if flag is not None:
            default = "none" if action.default in ("", None) else action.default
            meaning = re.sub(r" \(default: [^)]*\)$", "", str(action.help))
            rows.append(f"| `{flag}` | {meaning} | {default} |")
    return "\n".join(rows)


def cell(text: str) -> str:
    """``text`` on one line, safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def portable(text: str) -> str:
    """``text`` with the installed package's own folder written as the package's name (a default such
    as the data folder is a path in the checkout or environment at hand)."""
    import sglang_fair

    package = Path(sglang_fair.__file__).resolve().parent
    return text.replace(str(package), "sglang_fair")


def flag_table(parser: argparse.ArgumentParser) -> str:
    """One row per option of ``parser`` (``--help`` itself left out): its spellings, default and help,
    the help as ``--help`` prints it with its ``(default: ...)`` moved to its own column."""
    formatter = parser._get_formatter()
    rows = ["| flag | default | meaning |", "| --- | --- | --- |"]
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flags = " ".join(f"`{o}`" for o in action.option_strings)
        text = formatter._expand_help(action) if action.help else ""
        text = re.sub(r" ?\(default: [^)]*\)$", "", text.strip())
        if action.choices is not None and not isinstance(action.choices, dict):
            text += f" (one of: {', '.join(str(c) for c in action.choices)})"
        default = action.default
        default = "none" if default in ("", None) or default is argparse.SUPPRESS else f"`{default}`"
        rows.append(f"| {flags} | {cell(portable(str(default)))} | {cell(portable(text))} |")
    return "\n".join(rows)


def command_flags(name: str) -> Callable[[], str]:
    return lambda: flag_table(command_parser(name))


BLOCKS: dict[str, Callable[[], str]] = {"fair-defaults": fair_defaults, "batch-flags": batch_flags,
                                        **{f"flags-{name}": command_flags(name) for name in COMMANDS}}


def block_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated: {name} [^>]*-->\n)(.*?)(<!-- end generated: {name} -->)", re.S)


def synced(text: str) -> str:
    """``text`` with every generated block it holds rewritten."""
    for name, make in BLOCKS.items():
        text = rewritten(text, name, make())
    return text


def rewritten(text: str, name: str, body: str) -> str:
    """``text`` with the block ``name`` holding ``body``."""
    return block_pattern(name).sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = parser.parse_args(argv)
    stale = []
    for name in FILES:
        path = ROOT / name
        text = path.read_text()
        new = synced(text)
        if new != text:
            stale.append(name)
            if not args.check:
                path.write_text(new)
    if stale and args.check:
        print(f"stale generated blocks in {', '.join(stale)}: run sglang-fair lab sync-docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
