"""Priority bands and their reserve on the real CPU engine: an interactive client beside a batch flood.

    sglang-fair lab bands-live --model DIR [--window 40] [--max-running 4] [--json out.json]

Four ``sglang-fair serve`` runs (``dlpm_light``, ``--max-running-requests``): a closed-loop interactive
client ``chat`` (one request in flight, 16 output tokens) alone; beside a batch client ``etl`` (4x the cap in
flight, 128 output tokens) with bands (``chat=interactive,etl=batch``) and no reserve
(``--fair-band-reserve-s 0``); the same with the reserve and no prefill pace (``--fair-band-prefill-share
1``); with the reserve and the pace (the defaults). Prints the interactive P50 and
P99 latency of each run (unfinished requests count to the window's end), the P99 over alone, and the
batch client's output tokens/s. Used for docs/guides/tenants.md's CPU-engine figures (2026-11-28).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sglang_fair.harness.closed_loop import ClientSpec, run_load
from sglang_fair.harness.server import running_server
from sglang_fair.metrics import percentile

BANDS = ("--fair-client-bands", "chat=interactive,etl=batch")


def cases(cap: int) -> dict[str, tuple[tuple[str, ...], list[ClientSpec]]]:
    chat = ClientSpec("chat", 1, lambda i: f"hello number {i} " * 8, 16)
    etl = ClientSpec("etl", 4 * cap, lambda i: f"batch document {i} " * 60, 128)
    return {"alone": ((), [chat]),
            "bands": ((*BANDS, "--fair-band-reserve-s", "0"), [chat, etl]),
            "reserve": ((*BANDS, "--fair-band-prefill-share", "1"), [chat, etl]),
            "paced": (BANDS, [chat, etl])}


def run_case(model: Path, cap: int, extra: tuple[str, ...], specs: list[ClientSpec], window: float,
             log: Path) -> dict[str, Any]:
    args = ("--schedule-policy", "dlpm_light", "--max-running-requests", str(cap),
            "--max-total-tokens", "60000", *extra)
    with running_server(model, args, log) as url:
        run_load(url, specs, 5.0)  # warm-up
        res, end = run_load(url, specs, window)
    lat = res["chat"].latencies(end)
    etl = res.get("etl")
    return {"chat_p50_s": percentile(lat, 50), "chat_p99_s": percentile(lat, 99), "chat_requests": len(lat),
            "etl_tokens_per_s": sum(o.completion_tokens for o in etl.done()) / window if etl else 0.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="model directory (the tiny test model)")
    p.add_argument("--window", type=float, default=40.0, help="seconds of load per run")
    p.add_argument("--max-running", type=int, default=4, help="--max-running-requests")
    p.add_argument("--logs", type=Path, default=Path("."), help="directory of the servers' logs")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args(argv)
    out: dict[str, dict[str, Any]] = {}
    for name, (extra, specs) in cases(args.max_running).items():
        out[name] = row = run_case(args.model, args.max_running, extra, specs, args.window,
                                   args.logs / f"bands-live-{name}.log")
        x = row["chat_p99_s"] / out["alone"]["chat_p99_s"]
        print(f"{name:>8}: chat P50 {row['chat_p50_s']:.2f} s, P99 {row['chat_p99_s']:.2f} s "
              f"({x:.1f}x alone), {row['chat_requests']} requests; "
              f"etl {row['etl_tokens_per_s']:.0f} tokens/s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0
