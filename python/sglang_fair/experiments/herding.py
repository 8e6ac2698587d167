"""Does d2lpm_guarded remove D²LPM's herding? Both over Q^w, beside cache-aware, Preble and VTC.

    sglang-fair lab herding [--scenarios herd,tot-s1,judge-s1] [--dps 2,4]
        [--qws 16384,262144] [--duration 60] [--warmup 15] [--cooldown 20] [--json PATH] [--jobs 1]

Scenarios (4 clients, c0 misbehaving with 4x the others' programs, simulated A100 + Llama-3.1-8B):
  herd       one-call programs whose prompt is a template shared by every client (--herd-template, 32),
             then the client's own 1,500-token prefix, then a unique 64-token question; 128 output
             tokens; --herd-rate programs/s per well-behaved client per worker (default 1.5)
  tot-s1, judge-s1
             the papers' workloads with the small KV pools of the Q^u sweep (6,000 / 8,000
             tokens: switching clients costs prefix recomputation), their arrival rate scaled with D
             (--rate: a fixed rate per client instead)
Steady-state protocol: arrivals for --duration seconds, the run stops there, metrics over
[--warmup, --duration], latency over the programs arriving up to --cooldown seconds before the end
(unfinished ones count as waiting until the end). Per run: throughput (perceived service per
second), Jain's index, well-behaved P99 program latency, hit rate, and the load imbalance: the
busiest worker's actual service over the mean worker's (1 = balanced, D = all on one worker).
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from pathlib import Path
from typing import Any

from sglang_fair.experiments.runner import Task, floats, ints, log_row, names, run_tasks, save_json
from sglang_fair.experiments.scenarios import PAPER, paper_workload, sweep_spec
from sglang_fair.metrics import summarize
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.workloads import make_workload
from sglang_fair.workloads.program import Call, Program
from sglang_fair.workloads.tokens import random_tokens, seeded_rng

BASELINES = ("cache_aware:lpm", "preble:preble", "client_rr:vtc")
VARIANTS = ("d2lpm:dlpm", "d2lpm_guarded:dlpm")
CLIENTS = ("c0", "c1", "c2", "c3")


def herd_programs(duration: float, dp: int, rate: float, template_len: int, seed: int = 0) -> list[Program]:
    """One-call programs: a template shared by all + the client's 1,500-token prefix + 64 unique."""
    rng = seeded_rng("herd", seed)
    template = random_tokens(rng, template_len)
    prefixes = {c: random_tokens(rng, 1500) for c in CLIENTS}
    arrivals = random.Random(seed)
    raw: list[tuple[float, str]] = []
    for c in CLIENTS:
        per_s, t = rate * dp * (4 if c == "c0" else 1), 0.0
        while (t := t + arrivals.expovariate(per_s)) < duration:
            raw.append((t, c))
    raw.sort()
    return [Program(pid, c, t, (Call((template, prefixes[c], random_tokens(rng, 64)), 128),), seed,
                    c == "c0", "e2e", "herd") for pid, (t, c) in enumerate(raw)]


def scenario(name: str, args: argparse.Namespace, dp: int, seed: int
             ) -> tuple[list[Program], EngineConfig]:
    """The programs and engine of ``herd`` or a paper scenario."""
    if name == "herd":
        return herd_programs(args.duration, dp, args.herd_rate, args.herd_template, seed), EngineConfig()
    wl = paper_workload(name, args.duration, rate=args.rate, seed=seed)
    return make_workload(wl, dp), EngineConfig(kv_tokens=PAPER[name][1], max_running=256)


def run(name: str, dp: int, pair: str, qw: float, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run of the steady-state protocol; the row of the table and the JSON."""
    programs, engine = scenario(name, args, dp, seed)
    t0 = time.perf_counter()
    res = Simulator(sweep_spec(engine, pair, args.duration, dp, q_w=qw or 16384.0), programs).run()
    s = summarize(res, (args.warmup, args.duration), (args.warmup, args.duration - args.cooldown))
    load = [w["actual_service"] for w in s["workers"]]
    return {"scenario": name, "seed": seed, "dp": dp, "pair": pair, "q_w": qw,
            "throughput": s["throughput"], "jain_index": s["jain_index"],
            "well_behaved_p50_s": s["well_behaved_p50_s"], "well_behaved_p99_s": s["well_behaved_p99_s"],
            "cache_hit_rate": s["cache_hit_rate"], "censored": s["latency_censored"],
            "imbalance": round(max(load) * len(load) / max(sum(load), 1e-9), 3),
            "wall_s": round(time.perf_counter() - t0, 1)}


def cell(values: list[float], fmt: str) -> str:
    """The mean, and [min-max] over seeds when there are several."""
    mean = format(sum(values) / len(values), fmt)
    return mean if len(values) == 1 else f"{mean} [{min(values):{fmt}}-{max(values):{fmt}}]"


def table(rows: list[dict[str, Any]]) -> str:
    """One line per (scenario, D, pair, Q^w): means over seeds with [min-max]."""
    lines = ["| scenario | D | pair | Q^w | throughput | Jain | well-behaved P99 s (censored) | "
             "hit rate | imbalance |", "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["dp"], r["pair"], r["q_w"]), []).append(r)
    for (name, dp, pair, qw), rs in groups.items():
        p99 = [r["well_behaved_p99_s"] for r in rs if r["well_behaved_p99_s"] is not None]
        q = f"{qw:g}" if qw else "-"
        lines.append(
            f"| {name} | {dp} | {pair} | {q} | {cell([r['throughput'] for r in rs], ',.0f')} | "
            f"{cell([r['jain_index'] for r in rs], '.3f')} | {cell(p99, '.1f') if p99 else '-'} "
            f"({sum(r['censored'] for r in rs)}) | {cell([r['cache_hit_rate'] for r in rs], '.3f')} | "
            f"{cell([r['imbalance'] for r in rs], '.2f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="herd,tot-s1,judge-s1")
    parser.add_argument("--dps", default="2,4")
    parser.add_argument("--qws", default="16384,262144")
    parser.add_argument("--pairs", default=",".join(BASELINES + VARIANTS))
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--cooldown", type=float, default=20.0)
    parser.add_argument("--herd-rate", type=float, default=1.5,
                        help="herd: programs/s per well-behaved client per worker (c0: 4x)")
    parser.add_argument("--seeds", default="0",
                        help="seeds of the arrivals and prompts (the table: mean [min-max])")
    parser.add_argument("--rate", type=float, default=0.0,
                        help="tot-s1, judge-s1: programs/s per client; 0 = the workload's default x D")
    parser.add_argument("--herd-template", type=int, default=32,
                        help="herd: tokens of the template every client's prompt starts with")
    parser.add_argument("--json", default="")
    parser.add_argument("--jobs", type=int, default=1, help="processes at a time")
    args = parser.parse_args(argv)
    if not 0 <= args.warmup < args.duration - args.cooldown:
        parser.error("need 0 <= --warmup < --duration - --cooldown")
    tasks = []
    for name in names(args.scenarios):
        if name != "herd" and name not in PAPER:
            parser.error(f"unknown scenario {name!r}: herd, {', '.join(PAPER)}")
        for dp, seed in itertools.product(ints(args.dps), ints(args.seeds)):
            tasks += [Task(name, run, (name, dp, pair, qw, seed, args)) for pair in names(args.pairs)
                      for qw in (floats(args.qws) if pair in VARIANTS else [0.0])]
    rows = run_tasks(tasks, args.jobs, lambda _, row: log_row(row))
    print(table(rows))
    if args.json:
        save_json(Path(args.json), rows, indent=1)
    return 0
