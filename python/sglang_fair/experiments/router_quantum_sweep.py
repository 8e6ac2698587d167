"""Which Q^w? D²LPM over a router-quantum sweep on two workers, beside RR+LPM, cache-aware+LPM and VTC.

    sglang-fair lab router-quantum-sweep [--duration 20] [--qws 1024,4096,16384,65536,262144]
        [--scenarios flood,tot-s1,judge-s1] [--dp 2] [--variants d2lpm:dlpm,d2lpm:dlpm_light]
        [--json results/router_quantum_sweep.json] [--plot docs/img/router_quantum_sweep.png] [--jobs 1]

The scenarios and per-run figures of the Q^u sweep (:mod:`sglang_fair.experiments.quantum_sweep`:
light P99, the flooding client's hit rate, throughput, Jain's index), served by ``--dp`` simulated
A100 + Llama-3.1-8B workers behind the router (the paper workloads' arrival rate scaled with the
workers, the flood's closed loops unchanged); every worker runs the admission policy at its default Q^u.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

from sglang_fair.experiments.runner import Task, floats, log_row, names, run_tasks
from sglang_fair.experiments.scenarios import measure, scenario, sweep_spec
from sglang_fair.experiments.sweeps import Sweep, report
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.workloads import Program

BASELINES = ("round_robin:lpm", "cache_aware:lpm", "client_rr:vtc")
VARIANTS = ("d2lpm:dlpm", "d2lpm:dlpm_light")
QW_SWEEP = Sweep("pair", "q_w", "Q^w", VARIANTS, BASELINES, (
    ("light_p99_s", "light P99 (s)"), ("flooder_hit_rate", "c0 hit rate"), ("throughput", "tokens/s")))


def run_one(name: str, programs: list[Program], engine: EngineConfig, light: tuple[str, ...] | None,
            dp: int, pair: str, qw: float, duration: float) -> dict[str, Any]:
    """``dp`` workers under ``pair`` (router:policy) at Q^w ``qw`` (0: 16,384)."""
    t0 = time.perf_counter()
    res = Simulator(sweep_spec(engine, pair, 20 * duration, dp, q_w=qw or 16384.0), programs).run()
    return {"scenario": name, "pair": pair, "q_w": qw, **measure(res, light),
            "wall_s": round(time.perf_counter() - t0, 1)}


def sweep(scenarios: list[str], qws: list[float], duration: float, dp: int,
          variants: tuple[str, ...] = VARIANTS, jobs: int = 1) -> list[dict[str, Any]]:
    """Every scenario's baselines, then its variants at every Q^w."""
    tasks = []
    for name in scenarios:
        programs, engine, light = scenario(name, duration, dp)
        runs = [(p, 0.0) for p in BASELINES] + [(p, q) for p in variants for q in qws]
        tasks += [Task(name, run_one, (name, programs, engine, light, dp, p, q, duration)) for p, q in runs]
    return run_tasks(tasks, jobs, lambda _, row: log_row(row))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--qws", default="1024,4096,16384,65536,262144")
    parser.add_argument("--scenarios", default="flood,tot-s1,judge-s1")
    parser.add_argument("--dp", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="router:policy pairs swept over Q^w")
    parser.add_argument("--json", default="")
    parser.add_argument("--plot", default="")
    parser.add_argument("--jobs", type=int, default=1, help="processes at a time")
    args = parser.parse_args(argv)
    variants = tuple(names(args.variants))
    if not variants or any(v.count(":") != 1 for v in variants):
        parser.error(f"--variants: router:policy pairs, comma-separated (got {args.variants!r})")
    rows = sweep(names(args.scenarios), floats(args.qws), args.duration, args.dp, variants, args.jobs)
    report(rows, args.json, args.plot, replace(QW_SWEEP, variants=variants))
    return 0
