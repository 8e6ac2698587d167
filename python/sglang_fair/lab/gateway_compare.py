"""The gateway's default policy against a plain round robin over two CPU servers (tiny model).

    sglang-fair lab gateway-compare --model DIR [--window 40] [--policies fair_cache_aware,round_robin]
        [--json results/compare_gateway.json]

Two ``sglang-fair serve`` instances (one worker each, one OpenMP thread each, their default
``dlpm_light``, trusting the gateway's token) and, per policy, a fresh ``sglang-fair gateway
--router-policy P`` in front of both. The workload is :mod:`sglang_fair.harness.dp_scenario`'s: a
heavy client keeps 32 ``/generate`` requests over five 1,000-word shared prefixes in flight, a light
client sends one unique 160-word prompt at a time; each client names itself in ``X-Client-Id``. Both
servers' prefix caches are flushed between policies. Per policy: output tokens/s and requests/s,
prefix-cache hit rate (cached over prompt tokens, from the servers' ``/fairness`` totals: all requests
sent in the window, also those finished after it; overall and per server), requests served per
client and per server, and the light client's P50/P99 latency (censored: requests unfinished at the
window's end count as window end minus send time). Needs SGLang (scripts/install_sglang_cpu.sh)
and the gateway extra.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sglang_fair.harness.dp_scenario import DPWorkload, run_dp_scenario
from sglang_fair.harness.gateway import running_gateway
from sglang_fair.harness.server import exit_on_sigterm, get_json, running_server
from sglang_fair.routing import ROUTING_POLICIES

SERVER_ARGS = ("--max-running-requests", "8", "--max-total-tokens", "4500")
TOKEN = "compare-gateway-token-0123456789abcdef"


def cache_totals(server: str) -> tuple[int, int]:
    """(input tokens, cached tokens) the server has charged all clients so far."""
    clients = get_json(server + "/fairness")["clients"].values()
    return sum(c["input_tokens"] for c in clients), sum(c["cached_tokens"] for c in clients)


def drain_and_flush(servers: list[str], timeout: float = 180.0) -> None:
    """Wait until no client has a request on any server, then empty both prefix caches."""
    deadline = time.monotonic() + timeout
    for server in servers:
        while any(c["running"] or c["waiting"] for c in get_json(server + "/fairness")["clients"].values()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{server} did not drain")
            time.sleep(0.5)
        req = urllib.request.Request(server + "/flush_cache?timeout=30", method="POST")
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()


def run_policy(servers: list[str], policy: str, window: float, tmp: Path) -> dict[str, Any]:
    """One window of the workload through a fresh gateway with ``policy``."""
    drain_and_flush(servers)
    before = [cache_totals(s) for s in servers]
    args = ("--router-policy", policy, "--gateway-token-file", str(tmp / "token"))
    with running_gateway(servers, args, tmp / f"gateway-{policy}.log") as gateway:
        summary = run_dp_scenario(gateway, DPWorkload(light_clients=1), window)
        routed = get_json(gateway + "/gateway/state")["workers"]
    drain_and_flush(servers)
    per_server, charged = {}, [0, 0]
    for server, (inp0, hit0), (inp1, hit1) in zip(servers, before, map(cache_totals, servers), strict=True):
        per_server[server] = {"input_tokens": inp1 - inp0, "cached_tokens": hit1 - hit0,
                              "hit_rate": round((hit1 - hit0) / max(1, inp1 - inp0), 3),
                              "routed": sum(w["routed"] for w in routed if w["server"] == server)}
        charged = [charged[0] + inp1 - inp0, charged[1] + hit1 - hit0]
    row = summary.row()
    done = sum(summary.done.values())
    return {"policy": policy, "window_s": window, "output_tok_per_s": row["output_tok_per_s"],
            "requests_per_s": round(done / window, 2), "hit_rate": round(charged[1] / max(1, charged[0]), 3),
            "done": summary.done, "light_p50_s": row["light_p50_s"], "light_p99_s": row["light_p99_s"],
            "service_per_s": row["service_per_s"], "jain": row["jain"], "servers": per_server}


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'policy':18} {'out tok/s':>9} {'req/s':>6} {'hit rate':>8} {'heavy':>6} {'light':>6} "
          f"{'light p50':>9} {'light p99':>9}  per server (hit rate, routed)")
    for r in rows:
        servers = "  ".join(f"{s['hit_rate']:.3f}/{s['routed']}" for s in r["servers"].values())
        print(f"{r['policy']:18} {r['output_tok_per_s']:9.1f} {r['requests_per_s']:6.2f} "
              f"{r['hit_rate']:8.3f} "
              f"{r['done'].get('heavy', 0):6d} {r['done'].get('light-1', 0):6d} {r['light_p50_s']:9.2f} "
              f"{r['light_p99_s']:9.2f}  {servers}")


def comparison_parser(doc: str, unit: str) -> argparse.ArgumentParser:
    """The flags every two-server CPU comparison takes: ``--model``, ``--window`` (seconds of load per
    ``unit``), ``--json``; its help is the script's docstring."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(doc.splitlines()[2:]))
    parser.add_argument("--model", type=Path, required=True, help="model dir (scripts/make_tiny_model.py)")
    parser.add_argument("--window", type=float, default=40.0, help=f"seconds of load per {unit}")
    parser.add_argument("--json", type=Path, help="write the rows here (e.g. results/NAME.json)")
    return parser


RunOne = Callable[[list[str], str, float, Path], dict[str, Any]]


def compare_on_two_servers(parser: argparse.ArgumentParser, args: argparse.Namespace,
                           server_args: tuple[str, ...], labels: list[str], run_one: RunOne,
                           print_table: Callable[[list[dict[str, Any]]], None]) -> int:
    """Two CPU servers (``server_args``, trusting a gateway token in the run's temporary directory), then
    ``run_one(servers, label, window, tmp)`` for each label in order, each row printed as JSON as it
    comes; the table, and the rows to ``--json``. A SIGTERM stops the servers."""
    if args.window <= 0:
        parser.error("--window must be > 0")
    exit_on_sigterm()  # a killed run leaves no server behind
    rows = []
    with tempfile.TemporaryDirectory(prefix="compare-") as name, ExitStack() as stack:
        tmp = Path(name)
        (tmp / "token").write_text(TOKEN + "\n")
        trust = ("--gateway-token-file", str(tmp / "token"))
        servers = [stack.enter_context(running_server(args.model, (*server_args, *trust), tmp / f"s{i}.log"))
                   for i in range(2)]
        for label in labels:
            rows.append(run_one(servers, label, args.window, tmp))
            print(json.dumps(rows[-1]), flush=True)
    print_table(rows)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def main() -> int:
    parser = comparison_parser(__doc__, "policy")
    parser.add_argument("--policies", default="fair_cache_aware,round_robin",
                        help=f"gateway policies in order, of: {', '.join(ROUTING_POLICIES.names())}")
    args = parser.parse_args()
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if unknown := sorted(set(policies) - set(ROUTING_POLICIES.names())):
        parser.error(f"unknown policy {unknown}; known: {', '.join(ROUTING_POLICIES.names())}")
    return compare_on_two_servers(parser, args, SERVER_ARGS, policies, run_policy, print_table)


if __name__ == "__main__":
    raise SystemExit(main())
