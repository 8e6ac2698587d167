#!/usr/bin/env python3
"""The weighted 4:1 pair on the real CPU engine, with each scheduler's view sampled every second.

    sglang-fair lab trace-weighted-dp --model DIR [--dp-size 2] [--concurrency 24] [--window 45]
        [--flags "--load-balance-method round_robin"] [--max-total-tokens 4500] [--json out.json]

``sglang-fair serve`` (no policy flag unless ``--flags``) with ``--client-weights heavy-a=4,heavy-b=1`` and
``--max-running-requests 8``; the two heavy clients of ``harness.dp_scenario.WeightedWorkload`` keep
``--concurrency`` requests each in flight for ``--window`` seconds. Prints the service ratio and, every 5 s,
each worker's waiting and running requests and DLPM counter per client (its published snapshot); with
``--json``, every sample, with each client's service and tokens there too. Used for the weighted trace of
docs/design/fair_router.md (2026-11-28): 2.5:1 until dlpm_light waited for a returning client, 3.5-3.6 since.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sglang_fair.harness.dp_scenario import WeightedWorkload, run_weighted
from sglang_fair.harness.server import running_server
from sglang_fair.sglang_plugin.tmpdirs import OWNER

FIELDS = ("waiting", "running", "counter", "service", "requests", "cached_tokens", "input_tokens")


def state_dir(pid: int) -> Path | None:
    """The schedulers' snapshot directory of the server whose launcher is ``pid`` (the plugin's private
    ``sglang-fair-*`` directory, which names its owner)."""
    for path in Path(tempfile.gettempdir()).glob(f"sglang-fair-*/{OWNER}"):
        if path.read_text().strip() == str(pid):
            return path.parent
    return None


def sample(stop: threading.Event, pid: int, out: list[dict[str, Any]], clients: tuple[str, ...]) -> None:
    began = time.monotonic()
    while not stop.wait(1.0):
        row: dict[str, Any] = {"t": round(time.monotonic() - began, 1)}
        directory = state_dir(pid)
        for path in sorted(directory.glob("scheduler-*.json")) if directory else []:
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            row[path.stem] = {c: {k: f.get(k) for k in FIELDS}
                              for c, f in data.get("clients", {}).items() if c in clients}
        out.append(row)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="a model directory (scripts/make_tiny_model.py)")
    p.add_argument("--dp-size", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=24, help="requests each heavy client keeps in flight")
    p.add_argument("--window", type=float, default=45.0, help="seconds of load")
    p.add_argument("--max-total-tokens", type=int, default=4500, help="each worker's KV pool")
    p.add_argument("--flags", default="", help="more serve flags, quoted")
    p.add_argument("--json", type=Path, help="write the ratio and every sample here")
    args = p.parse_args()
    workload = WeightedWorkload(concurrency=args.concurrency)
    clients = tuple(name for name, _ in workload.weights)
    serve_args = (*shlex.split(args.flags), "--max-running-requests", "8", "--max-total-tokens",
                  str(args.max_total_tokens), "--client-weights", workload.flag())
    log = Path(f"trace_weighted_dp{args.dp_size}.log")
    samples: list[dict[str, Any]] = []
    procs: list[subprocess.Popen[bytes]] = []
    with running_server(args.model, serve_args, log, dp_size=args.dp_size, started=procs.append) as url:
        stop = threading.Event()
        thread = threading.Thread(target=sample, args=(stop, procs[-1].pid, samples, clients), daemon=True)
        thread.start()
        row = run_weighted(url, workload, args.window)
        stop.set()
        thread.join()
    print(json.dumps(row))
    for s in samples[4::5]:
        cells = [f"t={s['t']:>5}"]
        for rank, figures in s.items():
            if rank != "t":
                cells.append(f"{rank}: " + " | ".join(
                    f"{c} w{v.get('waiting')} r{v.get('running')} q{round(v.get('counter') or 0)}"
                    for c, v in figures.items()))
        print("  ".join(cells))
    if args.json:
        args.json.write_text(json.dumps({**row, "samples": samples}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
