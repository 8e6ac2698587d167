"""Which Q^u protects a light client? DLPM and dlpm_light over a Q^u sweep, beside LPM, FCFS and VTC.

    sglang-fair lab quantum-sweep [--duration 30] [--qus 256,1024,4096,16384,65536]
        [--json results/quantum_sweep.json] [--plot docs/img/quantum_sweep.png] [--jobs 1]

The scenarios of :mod:`sglang_fair.experiments.scenarios` (flood, flood-mem, qa-s1, tot-s1,
judge-s1), one simulated A100 + Llama-3.1-8B worker each. Per run: light P99 (flood: the two light
clients' requests; paper workloads: the well-behaved clients' programs; unfinished ones count as
waiting until the end of the run), the flooding client's (c0's) cache hit rate, throughput
(perceived service per second) and the largest service gap between backlogged clients and Jain's
index of the clients' service rates.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from sglang_fair.experiments.runner import Task, floats, log_row, names, run_tasks
from sglang_fair.experiments.scenarios import measure, scenario, sweep_spec
from sglang_fair.experiments.sweeps import Sweep, report
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.workloads import Program

BASELINES = ("lpm", "fcfs", "vtc")
VARIANTS = ("dlpm", "dlpm_light")
QU_SWEEP = Sweep("policy", "q_u", "Q^u", VARIANTS, BASELINES)


def run_one(name: str, programs: list[Program], engine: EngineConfig, light: tuple[str, ...] | None,
            policy: str, qu: float, duration: float) -> dict[str, Any]:
    """One worker, round-robin routing, ``policy`` at Q^u ``qu`` (0: 4,096)."""
    t0 = time.perf_counter()
    spec = sweep_spec(engine, f"round_robin:{policy}", 20 * duration, q_u=qu or 4096.0)
    res = Simulator(spec, programs).run()
    return {"scenario": name, "policy": policy, "q_u": qu, **measure(res, light),
            "wall_s": round(time.perf_counter() - t0, 1)}


def sweep(scenarios: list[str], qus: list[float], duration: float, jobs: int = 1) -> list[dict[str, Any]]:
    """Every scenario's baselines, then its variants at every Q^u."""
    tasks = []
    for name in scenarios:
        programs, engine, light = scenario(name, duration)
        runs = [(p, 0.0) for p in BASELINES] + [(p, q) for p in VARIANTS for q in qus]
        tasks += [Task(name, run_one, (name, programs, engine, light, p, q, duration)) for p, q in runs]
    return run_tasks(tasks, jobs, lambda _, row: log_row(row))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--qus", default="256,1024,4096,16384,65536")
    parser.add_argument("--scenarios", default="flood,flood-mem,qa-s1,tot-s1,judge-s1")
    parser.add_argument("--json", default="")
    parser.add_argument("--plot", default="")
    parser.add_argument("--jobs", type=int, default=1, help="processes at a time")
    args = parser.parse_args(argv)
    rows = sweep(names(args.scenarios), floats(args.qus), args.duration, args.jobs)
    report(rows, args.json, args.plot, QU_SWEEP)
    return 0
