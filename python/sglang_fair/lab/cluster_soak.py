"""Soak: two CPU servers and two gateways at a fraction of their measured capacity, one row a minute.

    sglang-fair lab cluster-soak --model DIR [--minutes 30] [--load 0.7] [--json results/soak_cluster.json]

The cluster and clients of sglang-fair lab chaos, no fault. First the capacity (requests answered per second
with three times the clients' requests in flight, ``--capacity-seconds``); then the clients' requests at
Poisson times, ``--load`` x capacity in all, for ``--minutes``. After every minute it prints the requests
answered and failed, P50/P99 latency, each client's service that minute and Jain's index over service /
weight (the clients ask for different amounts: what matters is that it does not drift), and the resident
memory of every process. At the end: each process's growth after ``--settle`` minutes.

Exit code 0 when no request failed and no process grew by more than ``--memory-bound`` MiB after the
first ``--settle`` minutes; 1 otherwise. Needs SGLang (scripts/install_sglang_cpu.sh) and the gateway extra.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sglang_fair.harness.chaos import CLIENTS, SERVER_ARGS, specs
from sglang_fair.harness.cluster import start_cluster
from sglang_fair.harness.server import exit_on_sigterm
from sglang_fair.harness.soak import at_rate, capacity, growth, soak


def show(row: dict[str, Any]) -> None:
    mem = row["memory_mib"]
    print(f"minute {row['minute']:3}: answered {row['answered']:5}, failed {row['failed']}, "
          f"p50 {row['p50_s']} s, p99 {row['p99_s']} s, jain {row['jain']}, service "
          + " ".join(f"{c} {v:.0f}" for c, v in row["service"].items())
          + f"; memory MiB {sum(mem.values()):.0f} in all, "
          + " ".join(f"{p} {v:.0f}" for p, v in mem.items()), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True,
                        help="model directory (scripts/make_tiny_model.py)")
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--load", type=float, default=0.7, help="fraction of the measured capacity")
    parser.add_argument("--capacity-seconds", type=float, default=40.0)
    parser.add_argument("--settle", type=int, default=10, help="minutes after which memory may not grow")
    parser.add_argument("--memory-bound", type=float, default=32.0,
                        help="MiB a process may grow after --settle minutes")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.model.is_dir():
        parser.error(f"--model {args.model}: not a directory")
    if args.minutes < 1 or not 0 < args.load <= 1 or args.capacity_seconds <= 0 or args.settle < 1:
        parser.error("--minutes >= 1, 0 < --load <= 1, --capacity-seconds > 0 and --settle >= 1")
    exit_on_sigterm()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="soak-") as name, ExitStack() as stack:
        cluster = start_cluster(stack, args.model, Path(name), CLIENTS, SERVER_ARGS)
        print(f"cluster up in {time.monotonic() - began:.0f} s", flush=True)
        clients = specs(cluster.keys)
        top = capacity(cluster, clients, args.capacity_seconds)
        print(f"capacity: {top:.2f} requests/s answered; soaking at {args.load:g} x that", flush=True)
        rows = soak(cluster, at_rate(clients, args.load * top), args.minutes, CLIENTS, show)
    grew = growth(rows, min(args.settle, len(rows)))
    failed = sum(r["failed"] for r in rows)
    over = {p: g for p, g in grew.items() if g > args.memory_bound}
    print(f"\n{sum(r['answered'] for r in rows)} answered, {failed} failed in {args.minutes} min; "
          f"growth after minute {min(args.settle, len(rows))} (MiB): "
          + ", ".join(f"{p} {g:+.1f}" for p, g in grew.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"capacity_per_s": round(top, 2), "load": args.load, "rows": rows,
                                         "growth_after_settle": grew}, indent=1) + "\n")
    if failed or over:
        print(f"goals missed: {failed} failed; over {args.memory_bound:g} MiB: {over}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
