"""``sglang-fair sim``: run a workload on the simulated cluster, or compare router:policy pairs.

Flags come from the frozen configs (workload, cluster, engine). ``--compare "rr:lpm,d2lpm:dlpm"``
runs every pair on the same seeded workload and prints them side by side; ``--json`` writes the
summary (with ``--compare``: one object per pair under ``runs``); ``--plot-dir`` writes a PNG of
service over time per client for each run (needs the ``sim`` extra: matplotlib). ``--batching``
chooses each worker's batch formation (``sglang``, ``sarathi``, ``fairbatching``, ``slai``; flags
``--batch-...``); with ``--slo`` (on for any batching but ``sglang``) the summary has TTFT/TPOT
percentiles, SLO attainment and goodput under ``slo``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from sglang_fair.admission import ADMISSION_POLICIES, AdmissionConfig
from sglang_fair.batching import BATCHING_POLICIES, BatchingConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.metrics import MetricsConfig, RunResult, summarize_windows
from sglang_fair.routing import ROUTING_POLICIES, RouterConfig
from sglang_fair.sim.compare import plot_compare, verdict
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.report import (
    add_output_flags,
    format_clients,
    format_table,
    plot_service,
    service_series,
)
from sglang_fair.sim.simulator import Simulator, long_run_collector, stderr_progress
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig, call_count
from sglang_fair.workloads.tokens import make_tokenizer


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("sim", help="simulate a workload on a cluster (no GPU needed)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(p, WorkloadConfig)
    add_flags(p, ClusterSimConfig)
    p.add_argument("--router", default=RouterConfig.policy,
                   help=f"routing policy (default: {RouterConfig.policy})")
    p.add_argument("--policy", default=AdmissionConfig.policy,
                   help=f"admission policy (default: {AdmissionConfig.policy})")
    add_flags(p, EngineConfig)
    add_flags(p, AdmissionConfig, skip=("policy", "cost"))  # --fair-quantum, as in serve
    add_flags(p, RouterConfig, skip=("policy", "num_workers", "cost"))  # --router-quantum, ...
    add_flags(p, CostModel)  # --w-e, --w-q, --client-weights
    add_flags(p, MetricsConfig)  # --warmup, --steady-state, --cooldown
    p.add_argument("--batching", default="sglang", choices=BATCHING_POLICIES.names(),
                   help="batch formation policy (default: sglang, SGLang's prefill-first rule)")
    add_flags(p, BatchingConfig, skip=("policy",))  # --batch-token-budget, --batch-ttft, ...
    p.add_argument("--slo", action="store_true",
                   help="report TTFT/TPOT percentiles, SLO attainment, goodput (--batch-ttft, --batch-tpot)")
    p.add_argument("--plot", default="", help="one PNG comparing the pairs (needs the sim extra)")
    p.add_argument("--compare", default="", help='router:policy pairs, e.g. "round_robin:lpm,d2lpm:dlpm"')
    add_output_flags(p)
    p.set_defaults(func=main)


def parse_pairs(text: str, default: tuple[str, str]) -> list[tuple[str, str]]:
    """``"a:b,c:d"`` -> [(a, b), (c, d)], names checked against the registries."""
    pairs = [default] if not text.strip() else []
    for item in filter(None, (s.strip() for s in text.split(","))):
        require(item.count(":") == 1, f"--compare: {item!r} is not router:policy")
        router, policy = (s.strip() for s in item.split(":"))
        pairs.append((router, policy))
    for router, policy in pairs:
        require(router in ROUTING_POLICIES,
                f"unknown router {router!r}; known: {', '.join(ROUTING_POLICIES.names())}")
        require(policy in ADMISSION_POLICIES,
                f"unknown policy {policy!r}; known: {', '.join(ADMISSION_POLICIES.names())}")
    return pairs


def run_pairs(spec: RunSpec, pairs: list[tuple[str, str]], metrics: MetricsConfig | None = None,
              progress: bool = False) -> tuple[dict[str, dict[str, Any]], dict[str, RunResult]]:
    """Simulate ``spec`` with each (router, policy) pair on the same seeded workload; with ``metrics``
    the summary covers its steady-state window (and a steady-state run stops at the end of the
    arrivals); with ``spec.slo`` it has the SLO summary under ``slo``."""
    metrics = metrics or MetricsConfig()
    assert spec.workload is not None
    duration = spec.workload.duration
    if metrics.steady_state and not spec.cluster.max_time:
        spec = replace(spec, cluster=replace(spec.cluster, max_time=duration))
    programs = spec.programs()
    summaries: dict[str, dict[str, Any]] = {}
    results: dict[str, RunResult] = {}
    for router, policy in pairs:
        run = spec.with_pair(router, policy)
        if progress:
            print(f"{run.pair}: {len(programs)} programs, {call_count(programs)} calls",
                  file=sys.stderr, flush=True)
        sim = Simulator(run, programs)
        with long_run_collector():  # else the summary, walking the run's records, triggers full collections
            res = sim.run(stderr_progress(duration) if progress else None)
            summaries[run.pair] = summarize_windows(res, metrics, duration)
            if sim.slo is not None:
                summaries[run.pair]["slo"] = sim.slo.summary(max(duration, 1e-9))
        results[run.pair] = res
    return summaries, results


def spec_from_flags(args: argparse.Namespace) -> RunSpec:
    """The run spec the ``sim`` flags describe (``--slo`` is on for any batching but ``sglang``)."""
    cost = from_flags(CostModel, args)
    batching = from_flags(BatchingConfig, args, policy=args.batching)
    return RunSpec(workload=from_flags(WorkloadConfig, args), cluster=from_flags(ClusterSimConfig, args),
                   engine=from_flags(EngineConfig, args),
                   admission=from_flags(AdmissionConfig, args, policy=args.policy, cost=cost),
                   routing=from_flags(RouterConfig, args, policy=args.router, cost=cost),
                   batching=batching, cost=cost, slo=args.slo or batching.policy != "sglang")


def main(args: argparse.Namespace) -> int:
    spec = spec_from_flags(args)
    metrics = from_flags(MetricsConfig, args)
    pairs = parse_pairs(args.compare, (spec.routing.policy, spec.admission.policy))
    summaries, results = run_pairs(spec, pairs, metrics, args.progress)
    print(format_table(summaries))
    if spec.slo:
        print()
        print(format_slo(summaries, spec.batching.policy))
    if len(summaries) == 1:
        print()
        print(format_clients(next(iter(summaries.values()))))
    if lines := verdict(summaries):
        print()
        print("\n".join(lines))
    if args.json:
        assert spec.workload is not None
        docs = {name: dict(doc, service_series=service_series(results[name]))
                for name, doc in summaries.items()}
        config = {**spec.to_dict(), "metrics": asdict(metrics),
                  "tokenizer": make_tokenizer(spec.workload).name}
        _write_json(Path(args.json), docs, bool(args.compare), config)
    if args.plot:
        print(f"wrote {plot_compare(summaries, Path(args.plot))}")
    if args.plot_dir:
        for path in plot_service(results, Path(args.plot_dir)):
            print(f"wrote {path}")
    return 0


def _write_json(path: Path, summaries: dict[str, dict[str, Any]], compare: bool,
                config: dict[str, Any]) -> None:
    doc: dict[str, Any] = {"runs": summaries} if compare else dict(next(iter(summaries.values())))
    doc["config"] = config
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2, sort_keys=False))
    except OSError as err:
        raise ConfigError(f"cannot write --json {str(path)!r}: {err}") from None


def format_slo(summaries: dict[str, dict[str, Any]], batching: str) -> str:
    """One line per run: TTFT/TPOT percentiles (ms), attainment and goodput."""
    head = f"{'run (batching ' + batching + ')':<34} {'TTFT p50/p99 ms':>17} {'TPOT p50/p99 ms':>17} " \
           f"{'SLO met':>8} {'goodput':>8}"
    lines = [head]
    for name, doc in summaries.items():
        s = doc["slo"]
        lines.append(f"{name:<34} {_ms(s['ttft_p50'])}/{_ms(s['ttft_p99']):<8} {_ms(s['tpot_p50'])}/"
                     f"{_ms(s['tpot_p99']):<8} {s['slo_attainment']:>8.1%} {s['goodput']:>6.2f}/s")
    return "\n".join(lines)


def _ms(x: float) -> str:
    return f"{x * 1000:>8.0f}" if x < float("inf") else f"{'inf':>8}"
