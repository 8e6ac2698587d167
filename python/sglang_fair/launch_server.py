"""``python -m sglang_fair.launch_server ARGS`` is ``sglang-fair serve ARGS``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sglang_fair.cli import main as cli_main


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(["serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
