"""D²LPM + DLPM against round robin + LPM on SGLang's data-parallel CPU server (2 workers, tiny model).

    python scripts/bench_sglang_dp.py --model DIR [--window 30] [--json out.json]

Each configuration gets a fresh ``sglang-fair serve --dp-size 2 --load-balance-method M
--schedule-policy P`` (the global router runs in both), the scenario of
:mod:`sglang_fair.harness.dp_scenario` for ``--window`` seconds, and a read of the router's
``/state``. Prints one JSON row per configuration (recorded in docs/benchmarks.md).
Needs SGLang (scripts/install_sglang_cpu.sh) and scripts/make_tiny_model.py's model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from sglang_fair.harness.dp_scenario import DPWorkload, run_dp_scenario
from sglang_fair.harness.server import free_port, get_json, running_server

DLPM = ("--fair-quantum", "256")
CONFIGS = (("round_robin", "lpm", ()), ("round_robin", "dlpm", DLPM), ("d2lpm", "dlpm", DLPM),
           ("d2lpm", "dlpm", (*DLPM, "--router-quantum", "262144")))
SERVER_ARGS = ("--max-running-requests", "8", "--max-total-tokens", "4500")


def run_config(model: Path, method: str, policy: str, extra: tuple[str, ...], window: float,
               log: Path) -> dict[str, Any]:
    port = free_port()
    args = ("--load-balance-method", method, "--schedule-policy", policy, *SERVER_ARGS, *extra,
            "--router-http-port", str(port))
    with running_server(model, args, log, dp_size=2) as url:
        summary = run_dp_scenario(url, DPWorkload(), window)
        state = get_json(f"http://127.0.0.1:{port}/state")
    return {"method": method, "policy": policy, "extra": " ".join(extra), **summary.row(),
            "router_counts": state["counts"],
            "router_tree_tokens": state["tree_tokens"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for method, policy, extra in CONFIGS:
            log = Path(tmp) / f"{method}-{policy}.log"
            rows.append(run_config(args.model, method, policy, extra, args.window, log))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
