"""Overlay the service over time of runs from their JSON (``sglang-fair sim --json``, ``sglang-fair
bench --json``): one colour per client, one line style per run.

    sglang-fair lab overlay OUT.png sim=sim.json real=real.json [--title TEXT]

A ``sim --compare`` JSON holds several runs: name one with ``NAME=FILE:RUN`` (e.g.
``sim=sim.json:d2lpm:dlpm``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sglang_fair.sim.report import plot_overlay


def load_series(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME=FILE[:RUN]`` -> (NAME, that run's ``service_series``)."""
    name, _, rest = spec.partition("=")
    path, _, run = rest.partition(":")
    if not name or not path:
        raise SystemExit(f"overlay_runs: expected NAME=FILE[:RUN], got {spec!r}")
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"overlay_runs: cannot read {path}: {err}") from None
    if "runs" in doc:
        if run not in doc["runs"]:
            raise SystemExit(f"overlay_runs: {path} holds runs {', '.join(doc['runs'])}: name one as :RUN")
        doc = doc["runs"][run]
    if "service_series" not in doc:
        raise SystemExit(f"overlay_runs: {path} has no service_series (written by an older version?)")
    return name, doc["service_series"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("runs", nargs="+", help="NAME=FILE[:RUN]")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    runs = dict(load_series(spec) for spec in args.runs)
    print(f"wrote {plot_overlay(runs, args.out, title=args.title)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
