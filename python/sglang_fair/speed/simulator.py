"""Speed of the simulator itself: ``sglang-fair speed-sim [--dp 8 --duration 60 ...]``.

Reports simulated requests (LLM calls) per CPU second, simulated seconds per wall second
(the issue's target: at least 100x real time for D=8 Tree-of-Thoughts) and the time to build the
workload, for one router:policy pair, with CPU time per request and the peak memory (RSS) of the
process so far. ``--max-time`` stops the run there (a sustained-load run: arrivals until
``--duration``, cut at ``--max-time = --duration``). ``--requests 10000,100000,1000000`` runs
one bench per size, each with arrivals lasting as long as the offered load needs to send that many
requests (measured on a 60 s sample of the workload), and prints one JSON line per size as it
finishes.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from dataclasses import replace
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig, call_count, make_workload


def bench(spec: RunSpec) -> dict[str, Any]:
    """Build and simulate the spec's workload; return the speed figures."""
    workload, cluster = spec.workload, spec.cluster
    assert workload is not None
    t0, c0 = time.perf_counter(), time.process_time()
    programs = spec.programs()
    t1, c1 = time.perf_counter(), time.process_time()
    result = Simulator(spec, programs).run()
    t2, c2 = time.perf_counter(), time.process_time()
    calls = len(result.requests)  # dispatched (all of the workload unless cut by --max-time)
    return {
        "workload": workload.workload, "scenario": workload.scenario, "dp": cluster.dp,
        "pair": spec.pair, "programs": len(programs), "requests": calls,
        "steps": result.steps, "simulated_s": round(result.end_time, 2),
        "build_wall_s": round(t1 - t0, 2), "sim_wall_s": round(t2 - t1, 2), "sim_cpu_s": round(c2 - c1, 2),
        "requests_per_cpu_s": round(calls / max(c2 - c1 + c1 - c0, 1e-9), 1),
        "sim_requests_per_cpu_s": round(calls / max(c2 - c1, 1e-9), 1),
        "simulated_s_per_wall_s": round(result.end_time / max(t2 - t1, 1e-9), 1),
        "simulated_s_per_cpu_s": round(result.end_time / max(c2 - c1, 1e-9), 1),
        "steps_per_cpu_s": round(result.steps / max(c2 - c1, 1e-9), 1),
        "sim_cpu_us_per_request": round((c2 - c1) / max(calls, 1) * 1e6, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MB; Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", default="tot")
    p.add_argument("--scenario", default="none")
    p.add_argument("--dp", type=int, default=8)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--router", default="fair_cache_aware")
    p.add_argument("--policy", default="dlpm_light")
    p.add_argument("--source", default="mtbench")
    p.add_argument("--requests", default="", help="comma-separated request counts (sizes the duration)")
    p.add_argument("--max-time", type=float, default=0.0,
                   help="stop at this simulated time (sustained load: = --duration); 0 = run to the end")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("speed-sim", help="speed of the simulator itself", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    workload = WorkloadConfig(workload=args.workload, scenario=args.scenario, clients=args.clients,
                              rate=args.rate, duration=args.duration, source=args.source)
    spec = RunSpec(workload, ClusterSimConfig(dp=args.dp, max_time=args.max_time),
                   routing=RouterConfig(policy=args.router), admission=AdmissionConfig(policy=args.policy))
    if not args.requests:
        print(json.dumps(bench(spec), indent=2))
        return 0
    per_s = call_count(make_workload(replace(workload, duration=60.0), args.dp)) / 60.0
    for n in (int(x) for x in args.requests.split(",")):
        sized = replace(spec, workload=replace(workload, duration=round(n / per_s, 1)))
        print(json.dumps({"target_requests": n, **bench(sized)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
