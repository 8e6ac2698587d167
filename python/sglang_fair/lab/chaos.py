"""Chaos run: faults injected in turn into two CPU servers and two gateways under steady keyed traffic.

    sglang-fair lab chaos --model DIR [--minutes 15] [--faults scheduler-kill,...]
        [--json results/chaos.json] [--logs DIR]

Starts the cluster of ``harness/cluster.py`` (two ``sglang-fair serve``, one worker each, default
policy; two ``sglang-fair gateway`` replicas sharing what they route; HAProxy in front of them with
``docker/haproxy/haproxy.cfg``, health-checking each; every process on loopback), runs four keyed
clients through HAProxy: ``flood`` (4 in flight, ``/generate`` over a shared 300-word prefix), ``chat``
(2 in flight, streamed chat over a 100-word prefix), ``light`` and ``batch`` (1 each, streamed and
not, no shared prefix). Then each fault of ``harness/chaos.py`` in turn: a baseline, the fault, its
end, a watch. Per fault it prints a row (requests in flight when it began, outcomes of every request
that overlapped it, the slowest, those it hurt (failed or slower than 5 s), the time until completions
per second were back to 80% of the baseline; for a gateway's fault, the requests it was relaying and
how soon HAProxy took it out). Then, with no fault, a check: the servers' ``/fairness`` charges per
client against what the answers said (each request charged once), and nothing left in flight at either
gateway.

Exit code 0 when every goal holds: no request past its deadline (60 s), no 5xx but 503 (and 502 from
HAProxy for a request a gateway held when it was killed), recovery within 30 s of each fault's end, a
faulty gateway out of HAProxy within 5 s, the charges equal, nothing left in flight, and at least one
fault injected; 1 otherwise (the goals missed are printed). ``--minutes`` bounds the run: a fault that
would not fit is skipped (listed, and named in the last line); a ``--minutes`` that leaves room for none
of the faults asked for is refused at once (exit 2), before anything starts.
Needs SGLang (scripts/install_sglang_cpu.sh) and the gateway extra; ``OMP_NUM_THREADS=1`` suits a
small machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sglang_fair.harness.chaos import (
    CLIENTS,
    DEADLINE_S,
    FAULTS,
    SERVER_ARGS,
    check_phase,
    fault_seconds,
    goals_missed,
    run_fault,
    specs,
)
from sglang_fair.harness.cluster import start_cluster
from sglang_fair.harness.server import exit_on_sigterm
from sglang_fair.harness.traffic import Traffic

START_S = 60.0  # the cluster's start, budgeted (two servers and two gateways on this machine)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"\n{'fault':15} {'in flight':>9} {'requests':>8} {'hurt':>5} {'slowest s':>9} "
          f"{'back after s':>12}  outcomes")
    for r in rows:
        if "skipped" in r:
            print(f"{r['fault']:15} skipped: {r['skipped']}")
            continue
        outcomes = ", ".join(f"{k} {v}" for k, v in r["outcomes"].items())
        back = "never" if r["recovered_after_s"] is None else f"{r['recovered_after_s']:.1f}"
        print(f"{r['fault']:15} {r['in_flight_at_start']:9} {r['requests']:8} {r['hurt']:5} "
              f"{r['slowest_s']:9.1f} {back:>12}  {outcomes}")
        if "gateway_in_flight" in r:
            print(f"{'':15} the gateway relayed {r['gateway_in_flight']} then; HAProxy took it out after "
                  f"{r['balancer_out_after_s']} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True,
                        help="model directory (scripts/make_tiny_model.py)")
    parser.add_argument("--minutes", type=float, default=15.0, help="bound on the whole run")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"in order, of: {', '.join(FAULTS)}")
    parser.add_argument("--baseline", type=float, default=15.0, help="seconds of traffic before each fault")
    parser.add_argument("--watch", type=float, default=40.0, help="seconds watched after each fault's end")
    parser.add_argument("--check", type=float, default=30.0, help="seconds of the final check's traffic")
    parser.add_argument("--json", type=Path, help="write the rows and the check here")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this directory")
    args = parser.parse_args()
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    if unknown := sorted(set(faults) - set(FAULTS)):
        parser.error(f"unknown fault {unknown}; known: {', '.join(FAULTS)}")
    if not args.model.is_dir():
        parser.error(f"--model {args.model}: not a directory")
    if args.minutes <= 0 or args.baseline <= 0 or args.watch <= 0 or args.check <= 0:
        parser.error("--minutes, --baseline, --watch and --check must be > 0")
    shortest = min(fault_seconds(f, args.baseline, args.watch) for f in faults) + args.check + START_S
    if shortest > args.minutes * 60:
        parser.error(f"--minutes {args.minutes:g} leaves room for no fault: the shortest of "
                     f"{', '.join(faults)} needs {shortest / 60:.1f} minutes with the cluster's start and "
                     "the final check")
    exit_on_sigterm()
    began = time.monotonic()
    budget = args.minutes * 60
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="chaos-") as name, ExitStack() as stack:
        tmp = Path(name)
        cluster = start_cluster(stack, args.model, tmp, CLIENTS, SERVER_ARGS)
        print(f"cluster up in {time.monotonic() - began:.0f} s: "
              + ", ".join(f"{p.name} {p.url}" for p in cluster.procs()), flush=True)
        traffic = Traffic(cluster.balancer.url, specs(cluster.keys), DEADLINE_S).start()
        for name_ in faults:
            fault = FAULTS[name_]
            need = fault_seconds(name_, args.baseline, args.watch)
            if time.monotonic() - began + need + args.check + 60 > budget:
                rows.append({"fault": name_, "skipped": f"needs {need:.0f} s more than --minutes leaves"})
                continue
            rows.append(run_fault(cluster, traffic.snapshot, fault, args.baseline, args.watch))
            print(json.dumps(rows[-1]), flush=True)
        traffic.stop()
        check = check_phase(cluster, args.check)
        print(json.dumps({"check": check}), flush=True)
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
            for proc in cluster.procs():
                shutil.copy(proc.log, args.logs / proc.log.name)
    print_table(rows)
    missed = goals_missed(rows, check)
    ran = [r["fault"] for r in rows if "skipped" not in r]
    skipped = [r["fault"] for r in rows if "skipped" in r]
    if missed:
        print("\ngoals missed:\n  " + "\n  ".join(missed))
    else:
        print(f"\nall goals met for the {len(ran)} fault(s) injected ({', '.join(ran)})"
              + (f"; not checked, skipped for time: {', '.join(skipped)}" if skipped else ""))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        minutes = round((time.monotonic() - began) / 60, 1)
        args.json.write_text(json.dumps({"rows": rows, "check": check, "missed": missed,
                                         "minutes": minutes}, indent=1) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
