"""A light client beside a flood under each batch-formation policy and admission policy.

    sglang-fair lab light-client [--duration 10] [--jobs 1]

The ``flood`` scenario of :mod:`sglang_fair.experiments.scenarios` (a client flooding requests that
share a 2,048-token prefix, a backlogged client, two light clients sending one short request at a
time; one simulated A100 + Llama-3.1-8B worker, 24 running requests at most), run with each
admission policy (dlpm_light, dlpm, fcfs) and each batching policy at its defaults. Prints the light
clients' P99 latency, throughput, Jain's index, the largest backlogged service gap, median TTFT and
P99 TPOT ([3]'s SLOs: 2 s / 50 ms).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from sglang_fair.batching import BATCHING_POLICIES
from sglang_fair.experiments.runner import Task, names, run_tasks
from sglang_fair.experiments.scenarios import measure, scenario, sweep_spec
from sglang_fair.sim.config import EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.workloads import Program


def run_one(programs: list[Program], engine: EngineConfig, light: tuple[str, ...] | None, policy: str,
            batching: str, duration: float) -> dict[str, Any]:
    """One worker under admission ``policy`` and batch formation ``batching``: the flood's figures
    and the SLO summary."""
    t0 = time.perf_counter()
    sim = Simulator(sweep_spec(engine, f"round_robin:{policy}", 20 * duration, batching=batching, slo=True),
                    programs)
    res = sim.run()
    assert sim.slo is not None
    return {**measure(res, light), **sim.slo.summary(duration), "wall_s": time.perf_counter() - t0}


def _print(task: Task, r: dict[str, Any]) -> None:
    policy, batching = task.key
    print(f"{policy:<10} {batching:<12} {r['light_p99_s']:>11.2f} {r['throughput']:>9.0f} "
          f"{r['jain_index']:>6.3f} {r['max_backlogged_service_diff']:>9.0f} {r['ttft_p50']:>10.2f} "
          f"{r['tpot_p99'] * 1000:>11.0f}   ({r['wall_s']:.1f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=10.0, help="seconds of arrivals")
    p.add_argument("--policies", default="dlpm_light,dlpm,fcfs", help="admission policies")
    p.add_argument("--jobs", type=int, default=1, help="processes at a time")
    args = p.parse_args(argv)
    programs, engine, light = scenario("flood", args.duration)
    print(f"{'admission':<10} {'batching':<12} {'light P99 s':>11} {'thr tok/s':>9} {'Jain':>6} "
          f"{'max diff':>9} {'TTFT p50 s':>10} {'TPOT p99 ms':>11}")
    tasks = [Task((policy, batching), run_one, (programs, engine, light, policy, batching, args.duration))
             for policy in names(args.policies) for batching in BATCHING_POLICIES.names()]
    run_tasks(tasks, args.jobs, _print)
    return 0
