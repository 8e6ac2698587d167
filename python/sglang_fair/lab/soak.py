"""Soak run (outside CI): mixed clients for minutes against the CPU server, memory of every process.

    sglang-fair lab soak --model DIR [--minutes 10] [--dp-size 2] [--json soak.json]

Starts ``sglang-fair serve`` (``--policy``, ``dlpm_light`` by default; with ``--dp-size 2`` the
global router too, ``--router``, D²LPM by default), runs a flooding client over a shared prefix, two
light clients and four clients whose ids change every minute (the churn ``--client-ttl`` bounds), one
minute at a time, and prints after each minute the requests completed, errors, and the resident memory
of each process of the server's tree (kept per minute in ``--json``: a leak shows as a slope, a filling
cache as a plateau). ``--plain-sglang`` runs the same load against SGLang without the plugin, the
control that tells the plugin's memory from SGLang's. Build the model with ``python
scripts/make_tiny_model.py DIR``. Set ``OMP_NUM_THREADS=1`` on a small machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from sglang_fair.harness.closed_loop import ClientSpec, run_load
from sglang_fair.harness.server import get_json, running_server

WORDS = ["the", "fair", "share", "of", "a", "queue", "is", "the", "service", "a", "client", "gets", "when",
         "others", "wait"]
CHURN = 4  # new client ids per minute


def words(seed: int, n: int) -> str:
    return " ".join(WORDS[(seed * 7 + i * 3) % len(WORDS)] for i in range(n))


def clients(minute: int) -> list[ClientSpec]:
    prefix = words(1, 600)
    return [
        ClientSpec("heavy", 8, lambda i: f"{prefix} {words(i, 8)}", 24),
        ClientSpec("light-1", 1, lambda i: words(1000 + i, 80), 24),
        ClientSpec("light-2", 1, lambda i: words(2000 + i, 80), 24),
        *(ClientSpec(f"churn-{minute}-{k}", 1, lambda i, k=k: words(3000 + 97 * k + i, 40), 8)  # type: ignore[misc]
          for k in range(CHURN)),
    ]


def memory(proc: subprocess.Popen[bytes]) -> dict[str, float]:
    """Resident MiB of the server and each of its descendants, by a short name."""
    import psutil

    root = psutil.Process(proc.pid)
    out: dict[str, float] = {}
    for p in [root, *root.children(recursive=True)]:
        try:
            name = f"{p.name()} {' '.join(p.cmdline()[1:3])}"[:60]
            out[f"{p.pid} {name}"] = round(p.memory_info().rss / 2**20, 1)
        except psutil.Error:
            continue
    return out


def server_args(policy: str, router: str, dp_size: int, client_ttl: float, plain: bool) -> list[str]:
    """The server's flags: this project's (``--client-ttl``, the router) or, ``plain``, SGLang's own."""
    args = ["--schedule-policy", policy, "--max-running-requests", "16", "--max-total-tokens", "60000"]
    if not plain:
        args += ["--client-ttl", str(client_ttl)]
    if dp_size > 1:
        args += ["--load-balance-method", router]
    return args


def soak(model: Path, minutes: int, dp_size: int, log: Path, args: list[str], plain: bool) -> dict[str, Any]:
    module = "sglang.launch_server" if plain else "sglang_fair.launch_server"
    procs: list[subprocess.Popen[bytes]] = []
    report: dict[str, Any] = {"minutes": [], "model": str(model), "dp_size": dp_size, "server": module,
                              "args": args}
    with running_server(model, args, log, dp_size=dp_size, started=procs.append, module=module) as url:
        report["memory_start"] = memory(procs[0])
        for minute in range(minutes):
            results, _ = run_load(url, clients(minute), 60.0)
            row = {c: {"done": len(r.done()), "errors": sum(1 for o in r.outcomes if o.latency is not None
                                                             and o.status != 200)}
                   for c, r in results.items()}
            report["minutes"].append({"clients": row, "memory": memory(procs[0])})
            done = sum(r["done"] for r in row.values())
            errors = sum(r["errors"] for r in row.values())
            rss = " ".join(f"{v:.0f}" for v in report["minutes"][-1]["memory"].values())
            print(f"minute {minute + 1}: {done} done, {errors} errors; resident MiB {rss}; {json.dumps(row)}",
                  flush=True)
        time.sleep(5)  # let the tails drain
        report["memory_end"] = memory(procs[0])
        report["fairness_clients"] = None if plain else len(get_json(url + "/fairness").get("clients", {}))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--dp-size", type=int, default=1)
    parser.add_argument("--client-ttl", type=float, default=600.0, help="the server's --client-ttl")
    parser.add_argument("--policy", default="dlpm_light", help="the workers' --schedule-policy")
    parser.add_argument("--router", default="d2lpm", help="--load-balance-method with --dp-size > 1")
    parser.add_argument("--plain-sglang", action="store_true",
                        help="SGLang's own launcher, without this project's plugin (a control; SGLang's "
                             "--schedule-policy and --load-balance-method, e.g. lpm and round_robin)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--log", type=Path, default=Path("soak-server.log"))
    args = parser.parse_args()
    flags = server_args(args.policy, args.router, args.dp_size, args.client_ttl, args.plain_sglang)
    report = soak(args.model, args.minutes, args.dp_size, args.log, flags, args.plain_sglang)
    start, end = report["memory_start"], report["memory_end"]
    for name in sorted(set(start) | set(end)):
        print(f"{name:70s} {start.get(name, '-'):>8} -> {end.get(name, '-'):>8} MiB")
    if report["fairness_clients"] is not None:
        print(f"clients at /fairness at the end: {report['fairness_clients']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
