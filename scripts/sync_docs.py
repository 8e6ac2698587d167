"""Rewrite the generated blocks of README.md and docs/guides/serve.md from the code they describe.

A block sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``; its text comes
from one source, the same that ``sglang-fair serve --help`` prints:

- ``fair-defaults``: what ``serve`` runs with no policy flag and every SGLang feature that turns a
  default back to SGLang's own (``sglang_plugin/defaults.py``'s ``defaults_summary``);
- ``batch-flags``: the ``--batch-*`` flags of ``serve``, their help and defaults (``BatchingConfig``).

    .venv/bin/python scripts/sync_docs.py          # rewrite the blocks
    .venv/bin/python scripts/sync_docs.py --check  # exit 1 naming the stale ones (tests/project runs it)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("README.md", "docs/guides/serve.md")


def fair_defaults() -> str:
    from sglang_fair.sglang_plugin.defaults import defaults_summary

    return defaults_summary(markdown=True)  # one line: a wrapped `--pp-size > 1` could start a quote


def batch_flags() -> str:
    from sglang_fair.cli import build_parser

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    rows = ["| flag | meaning | default |", "| --- | --- | --- |"]
    for action in serve._actions:
        flag = next((o for o in action.option_strings if o.startswith("--batch-")), None)
        if flag is not None:
            default = "none" if action.default in ("", None) else action.default
            meaning = re.sub(r" \(default: [^)]*\)$", "", str(action.help))
            rows.append(f"| `{flag}` | {meaning} | {default} |")
    return "\n".join(rows)


BLOCKS: dict[str, Callable[[], str]] = {"fair-defaults": fair_defaults, "batch-flags": batch_flags}


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
        print(f"stale generated blocks in {', '.join(stale)}: run scripts/sync_docs.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
