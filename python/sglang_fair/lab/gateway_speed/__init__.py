"""How far one ``sglang-fair gateway`` process goes: its saturation throughput, the latency it adds and
where its CPU time goes, against stub servers that answer at once (no SGLang, no model).

    sglang-fair lab gateway-speed [--seconds 10] [--concurrency 64] [--rates 20,100] [--ids-latency]
        [--prompts codes|prose] [--profile] [--vs-smg] [--baseline-src DIR] [--workers 1,2]
        [--json results/speed_gateway.json]

One stub process (an asyncio protocol with httptools and orjson, ``stub.py``; two ports: the gateway
sees two servers of one worker each) answers ``/server_info``, ``/health``, ``/tokenize`` (one id per
word of the prompt) and ``/generate`` and ``/v1/chat/completions`` (a fixed 8-token answer) without
waiting; with ``--tokenizer DIR`` its
``/tokenize`` is that tokenizer's, rendering a chat as SGLang does, and the gateway is measured once
more with ``--tokenizer DIR`` (tokenizing in the gateway, no round trip). The gateway (default policy,
``fair_cache_aware``) runs in its own process; on a machine with two or more cores it is pinned to
core 0 and the stub and this load generator to core 1. Requests are non-streamed chat completions of
a ~200-word prompt (one of 16 shared 180-word prefixes plus a question: the policy's tree has work to
do; ``--prompts prose`` makes the prefixes English words instead of codes), which cost the gateway a
``/tokenize`` round trip, and ``/generate`` with ``input_ids``, which do not.

1. Saturation: ``--concurrency`` requests kept in flight for ``--seconds``, through the gateway and
   directly to the stub (the stub and load generator's own ceiling); requests/s.
2. Added latency: open-loop Poisson arrivals at each of ``--rates`` per second for ``--seconds``,
   alternating direct and through the gateway; p50/p99 of each and their difference. Chats; with
   ``--ids-latency`` also ``/generate`` with ``input_ids`` (what the ``/tokenize`` round trip adds).
Every gateway measured gets the same bodies (chats carry ``"model": "stub"``, which SMG requires):
this checkout's gateway with ``--tokenizer none`` (a ``/tokenize`` call per chat) and, with
``--tokenizer DIR`` (which the stubs' ``/server_info`` then names), with no flag (``auto`` finds it);
with ``--baseline-src DIR`` also the gateway of another checkout (e.g. a worktree of the branch before
a change), run by this Python with no flag (with ``--tokenizer``, with it too); with
``--vs-smg`` also SGLang's Rust gateway SMG (``pip install smg==1.13.0``, an optional benchmark
dependency; ``--smg PATH``) with ``--policy cache_aware``. Each in turn alone on core 0; the direct
figures are measured once.

``--workers 1,2`` measures this checkout's gateway once per process count (``gateway --workers N``)
instead, nothing pinned (N processes need N cores, which the stub and load generator share on a small
machine). Every row records the CPU each part took during its chat saturation run (cores busy:
CPU seconds over wall seconds, from ``/proc``; the gateway's processes summed), the gateway's CPU
milliseconds per chat (its cores busy over the chats per second: what a busy shared machine changes
least) and the gateway's resident memory, so a ratio between rows can be read against what the stub
and load generator used. The load generator is one process of Python (uvloop, the gateway's own
HTTP client, ``harness/async_load.py``).

3. ``--profile``: py-spy (``pip install py-spy``; ``--py-spy PATH``) samples the gateway during a
   saturation run of chats: the share of its busy samples under each step of the request's path
   (inclusive), and by the library its innermost frame is in (exclusive, sums to 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from sglang_fair.lab.gateway_speed.runner import measure


def table(result: dict[str, Any]) -> str:
    """The gateways side by side (markdown)."""
    first: dict[str, Any] = next(iter(result["gateways"].values()), {})
    rates = list(first.get("open_loop_ms", {}))
    latencies = [(key, label) for key, label in (("open_loop_ms", "added p50 / p99 ms"),
                                                 ("open_loop_ms_ids", "ids: added p50 / p99 ms"))
                 if key in first]
    head = ["gateway (one core)" if result.get("pinned", True) else "gateway (nothing pinned)",
            "chat req/s", "ids req/s",
            *(f"{label} at {float(r):g}/s" for _, label in latencies for r in rates),
            "cores busy at chat saturation (gateway / stub / load generator)", "gateway CPU ms per chat",
            "gateway RSS MiB"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines.append(f"| direct to the stub | {result['max_rps_chat_direct']:,.0f} | "
                 f"{result['max_rps_ids_direct']:,.0f} |" + " |" * (len(rates) * len(latencies))
                 + f" - / {busy(result.get('cores_busy_chat_direct', {}))} | | |")
    for name, row in result["gateways"].items():
        added = [row[key][r]["added"] for key, _ in latencies for r in rates]
        cores = row.get("cores_busy_at_chat_saturation", {})
        lines.append(f"| {name} | {row['max_rps_chat']:,.0f} | {row['max_rps_ids']:,.0f} | "
                     + " | ".join(f"{a['p50']:.2f} / {a['p99']:.2f}" for a in added)
                     + f" | {cores.get('gateway', '-')} / {busy(cores)}"
                     + f" | {row.get('gateway_cpu_ms_per_chat', '-')} | {row.get('gateway_rss_mib', '')} |")
    return "\n".join(lines)


def busy(cores: dict[str, float]) -> str:
    return f"{cores.get('stub', '-')} / {cores.get('load generator', '-')}"


def beside_python(name: str) -> str:
    """The executable ``name`` of this Python's environment, else on the PATH ('' if neither)."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name) or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight at saturation")
    parser.add_argument("--rates", default="20,100",
                        help="open-loop requests/s, both paths together; comma-separated, one run each")
    parser.add_argument("--ids-latency", action="store_true",
                        help="also the added latency of /generate with input_ids (no /tokenize round trip)")
    parser.add_argument("--profile", action="store_true", help="sample the gateway with py-spy")
    parser.add_argument("--py-spy", default=beside_python("py-spy"), help="py-spy executable")
    parser.add_argument("--vs-smg", action="store_true",
                        help="also measure SGLang's Rust gateway SMG (pip install smg==1.13.0)")
    parser.add_argument("--smg", default=beside_python("smg"),
                        help="SMG's executable (with --vs-smg)")
    parser.add_argument("--baseline-src", type=Path,
                        help="also measure the gateway of this checkout (its python/ and router/)")
    parser.add_argument("--baseline-name", help="its name in the table (default: the folder's name)")
    parser.add_argument("--tokenizer", type=Path,
                        help="a model or tokenizer directory (scripts/make_tiny_model.py, "
                             "scripts/make_gpt2_tokenizer.py): the stub's /tokenize uses its "
                             "tokenizer; the gateway is also measured with --tokenizer (no /tokenize call)")
    parser.add_argument("--prompts", choices=["codes", "prose"], default="codes",
                        help="the chats' shared prefixes: made-up codes (w0x1 w0x2 ...) or English words "
                             "(about 5 characters a token in GPT-2's vocabulary)")
    parser.add_argument("--workers", default="",
                        help="comma-separated process counts (e.g. 1,2): measure this checkout's gateway "
                             "with --workers N for each, side by side, nothing pinned (instead of the "
                             "other gateways)")
    parser.add_argument("--json", type=Path, help="write the figures here (e.g. results/speed_gateway.json)")
    args = parser.parse_args()
    try:
        args.rates = [float(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--rates {args.rates!r}: give numbers, e.g. 20,100")
    try:
        args.workers = [int(n) for n in args.workers.split(",") if n.strip()]
    except ValueError:
        parser.error(f"--workers {args.workers!r}: give process counts, e.g. 1,2")
    if any(n < 1 for n in args.workers):
        parser.error("--workers: every process count must be >= 1")
    if args.workers and (args.vs_smg or args.baseline_src or args.tokenizer or args.profile):
        parser.error("--workers measures this checkout's gateway alone: leave out --vs-smg, --baseline-src, "
                     "--tokenizer and --profile")
    if args.seconds < 2 or args.concurrency < 1 or not args.rates or min(args.rates) <= 0:
        parser.error("--seconds must be >= 2, --concurrency >= 1, every rate > 0")
    if args.profile and not (args.py_spy and Path(args.py_spy).exists()):
        parser.error("--profile needs py-spy (pip install py-spy, or give --py-spy PATH)")
    if args.vs_smg and not Path(args.smg).is_file():
        parser.error(f"--vs-smg needs SMG, SGLang's Rust gateway, and {args.smg!r} is not there: "
                     "pip install smg==1.13.0 (an optional benchmark dependency), or give --smg PATH")
    if args.baseline_src and not (args.baseline_src / "python" / "sglang_fair").is_dir():
        parser.error(f"--baseline-src {args.baseline_src}: no python/sglang_fair there")
    with tempfile.TemporaryDirectory(prefix="speed-gateway-") as tmp:
        result = measure(args, Path(tmp))
    print(json.dumps(result))
    print(table(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
