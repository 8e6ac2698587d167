"""Golden check of the simulator: a fixed set of small, varied runs whose results must not change.

``sglang-fair lab sim-golden --save BASE.json`` runs every case and writes, per case, its summary and
a digest of every request's record (times, worker, cached prefix, retractions), the service series, the
end time and the step count; ``--check BASE.json`` runs them again and names each case that differs
(exit 1). Meant for speed work: an optimisation must leave every simulated result as it was. Keep the
baseline outside the repository (it is the old code's output, not a specification). ``--only NAME``
runs the cases whose name contains NAME.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.batching import BatchingConfig
from sglang_fair.metrics import MetricsConfig, RunResult, summarize_windows
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.report import service_series
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig


@dataclass(frozen=True)
class Case:
    """One run: workload flags, cluster flags, router and admission policy, engine flags, batching
    policy, metrics flags."""

    name: str
    workload: dict[str, Any]
    cluster: dict[str, Any]
    router: str
    policy: str
    engine: dict[str, Any] = field(default_factory=dict)
    batching: str = "sglang"
    metrics: dict[str, Any] = field(default_factory=dict)


def _c(name: str, kind: str, dp: int, router: str, policy: str, **kw: Any) -> Case:
    workload = {"workload": kind, "duration": kw.pop("duration", 20.0), "clients": kw.pop("clients", 4),
                "scenario": kw.pop("scenario", "s1" if kind in ("tot", "judge", "qa") else "none"),
                **kw.pop("wl", {})}
    cluster = {"dp": dp, **kw.pop("cl", {})}
    return Case(name, workload, cluster, router, policy, **kw)


SMALL_POOL = {"kv_tokens": 60_000}  # binds: retractions and evictions happen
CASES: tuple[Case, ...] = (
    _c("tot-d1-fcfs", "tot", 1, "round_robin", "fcfs"),
    _c("tot-d1-lpm", "tot", 1, "round_robin", "lpm"),
    _c("tot-d1-vtc", "tot", 1, "round_robin", "vtc"),
    _c("tot-d1-dlpm", "tot", 1, "round_robin", "dlpm"),
    _c("tot-d2-rr-lpm", "tot", 2, "round_robin", "lpm"),
    _c("tot-d2-d2lpm-dlpm", "tot", 2, "d2lpm", "dlpm"),
    _c("tot-d4-d2lpm-dlpm", "tot", 4, "d2lpm", "dlpm", clients=8),
    _c("tot-d4-guarded-dlpm_light", "tot", 4, "d2lpm_guarded", "dlpm_light", clients=8),
    _c("tot-d4-cache_aware-lpm", "tot", 4, "cache_aware", "lpm", clients=8),
    _c("tot-d4-preble-preble", "tot", 4, "preble", "preble", clients=8),
    _c("tot-d8-d2lpm-dlpm-steady", "tot", 8, "d2lpm", "dlpm", clients=8, duration=40.0,
       wl={"rate": 0.2}, cl={"max_time": 40.0}, metrics={"warmup": 10.0, "steady_state": True}),
    _c("tot-d2-pool-dlpm", "tot", 2, "d2lpm", "dlpm", engine=SMALL_POOL),
    _c("tot-d2-pool-lpm", "tot", 2, "round_robin", "lpm", engine=SMALL_POOL),
    _c("tot-d1-pool-vtc-ignore-eos", "tot", 1, "round_robin", "vtc",
       engine={**SMALL_POOL, "ignore_eos": True}),
    _c("tot-d2-pool-skip-misfits", "tot", 2, "d2lpm", "dlpm", engine={**SMALL_POOL, "skip_misfits": True},
       duration=12.0),
    _c("tot-d2-mixed-chunk", "tot", 2, "d2lpm", "dlpm", engine={"mixed_chunk": True}),
    _c("tot-d2-sarathi", "tot", 2, "d2lpm", "dlpm", batching="sarathi", duration=6.0),
    _c("tot-d2-fairbatching", "tot", 2, "d2lpm", "dlpm", batching="fairbatching", duration=6.0),
    _c("tot-d2-slai", "tot", 2, "round_robin", "lpm", batching="slai", duration=6.0),
    _c("judge-d1-dlpm", "judge", 1, "round_robin", "dlpm"),
    _c("judge-d2-client_rr-vtc", "judge", 2, "client_rr", "vtc"),
    _c("judge-d4-pab-dlpm", "judge", 4, "pab", "dlpm"),
    _c("judge-d2-shortest-fcfs", "judge", 2, "shortest_queue", "fcfs"),
    _c("qa-d2-d2lpm-dlpm", "qa", 2, "d2lpm", "dlpm", wl={"documents": 20}),
    _c("qa-d2-rr-lpm", "qa", 2, "round_robin", "lpm", wl={"documents": 20}),
    _c("qa-d4-cache_aware-dlpm", "qa", 4, "cache_aware", "dlpm", wl={"documents": 20}),
    _c("multiturn-d1-lpm", "multiturn", 1, "round_robin", "lpm"),
    _c("multiturn-d2-d2lpm-dlpm", "multiturn", 2, "d2lpm", "dlpm"),
    _c("multiturn-d2-preble-vtc", "multiturn", 2, "preble", "vtc"),
    _c("mix-d2-d2lpm-dlpm_light", "mix", 2, "d2lpm", "dlpm_light"),
    _c("tot-d2-pool-dlpm-retry1", "tot", 2, "d2lpm", "dlpm", engine={**SMALL_POOL, "retry_every": 1}),
)


def run_case(case: Case) -> dict[str, Any]:
    """Run one case; return its summary and digests."""
    workload = WorkloadConfig(**case.workload)
    spec = RunSpec(workload, ClusterSimConfig(**case.cluster), EngineConfig(**case.engine),
                   admission=AdmissionConfig(policy=case.policy), routing=RouterConfig(policy=case.router),
                   batching=BatchingConfig(policy=case.batching), slo=case.batching != "sglang")
    sim = Simulator(spec)
    res = sim.run()
    summary = summarize_windows(res, MetricsConfig(**case.metrics), workload.duration)
    if sim.slo is not None:
        summary["slo"] = sim.slo.summary(max(workload.duration, 1e-9))
    return {"summary": json.loads(json.dumps(summary, default=str)), **digests(res)}


def digests(res: RunResult) -> dict[str, Any]:
    """Hashes of every request's and program's record and of the service series (exact floats)."""
    requests = [[r.rid, r.pid, r.client, r.arrival, r.input_len, r.output_len, r.worker, r.admitted,
                 r.first_token, r.finished, r.cached_len, r.generated, r.retractions] for r in res.requests]
    programs = [[p.pid, p.client, p.arrival, p.first_token, p.finished] for p in res.programs]
    return {"requests": len(requests), "requests_digest": _hash(requests), "programs_digest": _hash(programs),
            "service_digest": _hash(service_series(res)), "end_time": repr(res.end_time), "steps": res.steps,
            "retractions": sum(r.retractions for r in res.requests),
            "cached_tokens": sum(r.cached_len for r in res.requests)}


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, default=repr).encode()).hexdigest()[:24]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, help="write the results here")
    mode.add_argument("--check", type=Path, help="compare with the results saved here")
    p.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = p.parse_args(argv)
    base = json.loads(args.check.read_text()) if args.check else {}
    results: dict[str, Any] = {}
    differ: list[str] = []
    for case in (c for c in CASES if args.only in c.name):
        t0 = time.process_time()
        results[case.name] = run_case(case)
        same = "" if not args.check else ("same" if base.get(case.name) == results[case.name] else "DIFFERS")
        if same == "DIFFERS":
            differ.append(case.name)
        r = results[case.name]
        print(f"{case.name:<32} {r['requests']:>6} req {r['retractions']:>5} retr "
              f"{time.process_time() - t0:6.2f} CPU s {same}", flush=True)
    if args.save:
        args.save.parent.mkdir(parents=True, exist_ok=True)
        args.save.write_text(json.dumps(results, indent=1, sort_keys=True))
        print(f"saved {len(results)} cases to {args.save}")
        return 0
    print(f"{len(results) - len(differ)} of {len(results)} cases identical" + (
        f"; differ: {', '.join(differ)}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
