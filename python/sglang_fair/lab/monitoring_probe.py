"""Check the compose `monitoring` profile and the load balancer as an operator would (docker_check.sh).

    sglang-fair lab monitoring-probe --prometheus http://127.0.0.1:9090 targets \\
        --expect sglang-fair=2,sglang-fair-gateway=2,haproxy=1
    sglang-fair lab monitoring-probe --prometheus URL moves --lb http://127.0.0.1:30443 --key K --client C
    sglang-fair lab monitoring-probe --prometheus URL dashboard \
        --file docker/grafana/dashboards/sglang-fair.json
    sglang-fair lab monitoring-probe lb --stats http://127.0.0.1:8404 --server gateway-1 --state DOWN

``targets``: Prometheus scrapes every target it was given, each job with the expected count, all up.
``moves``: chats through the load balancer with the key get 200 and two naming a model nobody serves 404,
then the client's per-client series move: its service summed over the servers (``sglang_fair:service``) and
its answers and refusals at the gateways (``sglang_fair_gateway_client_answers_total``). ``dashboard``: every
query of every panel of the Grafana
dashboard is valid PromQL to this Prometheus and returns data (panels of the router, which the fleet
profiles do not run, only need to be valid). ``lb``: HAProxy reports the gateway ``--server`` in ``--state``
(its health check). Standard library only. One line per check; the first that fails ends the run with
exit code 1 and names the check.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

ROUTER_ONLY = "sglang_fair_router_"  # panels that need the dp profile's router


class ProbeFailed(Exception):
    """A check did not see what an operator should see; the message says what it saw."""


def get(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    """The instant vector of ``expr``; ProbeFailed if Prometheus refuses it."""
    status, text = get(f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    answer = json.loads(text) if text.startswith("{") else {}
    if status != 200 or answer.get("status") != "success":
        raise ProbeFailed(f"query {expr!r}: HTTP {status}, {text[:200]}")
    return list(answer["data"]["result"])


def value(prometheus: str, expr: str) -> float:
    result = query(prometheus, expr)
    return float(result[0]["value"][1]) if result else 0.0


def check_targets(prometheus: str, expect: dict[str, int], wait: float) -> str:
    deadline, seen = time.monotonic() + wait, ""
    while True:
        status, text = get(f"{prometheus}/api/v1/targets?state=active")
        if status == 200:
            targets = json.loads(text)["data"]["activeTargets"]
            jobs: dict[str, list[str]] = {}
            for t in targets:
                jobs.setdefault(t["labels"]["job"], []).append(t["health"])
            seen = ", ".join(f"{j}: {h}" for j, h in sorted(jobs.items()))
            healthy = all(x == "up" for h in jobs.values() for x in h)
            if {j: len(h) for j, h in jobs.items()} == expect and healthy:
                return f"every target up: {seen}"
            down = [f"{t['scrapeUrl']}: {t['lastError']}" for t in targets if t["health"] == "down"]
            seen += f"; down: {down}" if down else ""
        if time.monotonic() > deadline:
            raise ProbeFailed(f"targets not all up with counts {expect} after {wait:g} s: {seen}")
        time.sleep(2)


def chat(lb: str, key: str, model: str = "default") -> int:
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "the fair cache"}]}
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    req = urllib.request.Request(lb + "/v1/chat/completions", data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code


def check_moves(prometheus: str, lb: str, key: str, client: str, count: int, wait: float) -> str:
    answers = "sum(sglang_fair_gateway_client_answers_total{{client=\"{}\",kind{}}})"
    series = {"service at the servers": f'sum(sglang_fair:service{{client="{client}"}})',
              "answers at the gateways": answers.format(client, '="requests"'),
              "refusals at the gateways": answers.format(client, '!="requests"')}
    before = {name: value(prometheus, expr) for name, expr in series.items()}
    statuses = [chat(lb, key) for _ in range(count)]
    if any(s != 200 for s in statuses):
        raise ProbeFailed(f"chats through the load balancer: {statuses}")
    for _ in range(2):  # a model nobody serves: 404, counted per client (the dashboard's error panel)
        if (status := chat(lb, key, "no-such-model")) != 404:
            raise ProbeFailed(f"a chat naming a model nobody serves: {status}, not 404")
    deadline = time.monotonic() + wait
    while True:
        now = {name: value(prometheus, expr) for name, expr in series.items()}
        if all(now[n] > before[n] for n in series):
            return (f"{count} chats through the load balancer 200; {client}'s "
                    + ", ".join(f"{n} {before[n]:g} -> {now[n]:g}" for n in series))
        if time.monotonic() > deadline:
            raise ProbeFailed(f"{client}'s series did not move within {wait:g} s: before {before}, now {now}")
        time.sleep(2)


def check_dashboard(prometheus: str, path: str, wait: float) -> str:
    """Every panel's queries valid and with data; an empty one is asked again until ``wait`` (a rate needs
    two scrapes of a series that has just appeared)."""
    with open(path) as fh:
        panels = [p for p in json.load(fh)["panels"] if p.get("type") != "row"]
    targets = [(panel["title"], t["expr"]) for panel in panels for t in panel.get("targets", [])]
    deadline = time.monotonic() + wait
    while True:
        empty = [f"{title}: {expr}" for title, expr in targets
                 if not query(prometheus, expr) and ROUTER_ONLY not in expr]
        if not empty:
            return (f"{len(targets)} queries of {len(panels)} panels valid, each with data "
                    "(router panels: valid)")
        if time.monotonic() > deadline:
            raise ProbeFailed(f"panels with no data: {empty}")
        time.sleep(2)


def check_lb(stats: str, server: str, state: str, wait: float) -> str:
    deadline, seen = time.monotonic() + wait, ""
    while True:
        status, text = get(f"{stats}/stats;csv")
        if status == 200:
            rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
            mine = [r["status"] for r in rows if r["pxname"] == "gateways" and r["svname"] == server]
            seen = mine[0] if mine else "?"
            if seen.split(" ")[0] == state:
                return f"HAProxy: {server} {seen}"
        if time.monotonic() > deadline:
            raise ProbeFailed(f"HAProxy reports {server} {seen}, not {state}, after {wait:g} s")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090")
    parser.add_argument("--wait", type=float, default=120.0, help="seconds a check may wait for its state")
    sub = parser.add_subparsers(dest="check", required=True)
    sub.add_parser("targets").add_argument("--expect", required=True, help="JOB=COUNT,...")
    moves = sub.add_parser("moves")
    for flag in ("--lb", "--key", "--client"):
        moves.add_argument(flag, required=True)
    moves.add_argument("--count", type=int, default=6)
    sub.add_parser("dashboard").add_argument("--file", required=True)
    lb = sub.add_parser("lb")
    lb.add_argument("--stats", required=True)
    lb.add_argument("--server", required=True)
    lb.add_argument("--state", choices=("UP", "DOWN"), required=True)
    args = parser.parse_args(argv)
    prometheus = args.prometheus.rstrip("/")
    try:
        if args.check == "targets":
            expect = {j: int(n) for j, n in (item.split("=") for item in args.expect.split(","))}
            line = check_targets(prometheus, expect, args.wait)
        elif args.check == "moves":
            line = check_moves(prometheus, args.lb.rstrip("/"), args.key, args.client, args.count, args.wait)
        elif args.check == "dashboard":
            line = check_dashboard(prometheus, args.file, args.wait)
        else:
            line = check_lb(args.stats.rstrip("/"), args.server, args.state, args.wait)
    except (ProbeFailed, OSError, ValueError, KeyError) as err:
        print(f"FAILED {args.check}: {err}")
        return 1
    print(f"ok {args.check}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
