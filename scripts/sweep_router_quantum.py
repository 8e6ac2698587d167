#!/usr/bin/env python3
"""Which Q^w? D²LPM over a router-quantum sweep on two workers, beside RR+LPM, cache-aware+LPM and VTC.

    python scripts/sweep_router_quantum.py [--duration 20] [--qws 1024,4096,16384,65536,262144]
        [--scenarios flood,tot-s1,judge-s1] [--dp 2] [--variants d2lpm:dlpm,d2lpm:dlpm_light]
        [--json results/router_quantum_sweep.json] [--plot docs/img/router_quantum_sweep.png]

The scenarios and per-run figures of ``scripts/sweep_quantum.py`` (light P99, the flooding client's
hit rate, throughput, Jain's index), served by ``--dp`` simulated A100 + Llama-3.1-8B workers behind
the router (the paper workloads' arrival rate scaled with the workers, the flood's closed loops
unchanged); every worker runs the admission policy at its default Q^u.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "python")]
from sglang_fair.admission import AdmissionConfig  # noqa: E402
from sglang_fair.routing import RouterConfig  # noqa: E402
from sglang_fair.sim.config import ClusterSimConfig  # noqa: E402
from sglang_fair.sim.simulator import Simulator  # noqa: E402
from sglang_fair.sim.spec import RunSpec  # noqa: E402
from sglang_fair.workloads import WorkloadConfig, make_workload  # noqa: E402
from sweep_quantum import PAPER, Sweep, measure, report, scenario  # noqa: E402

BASELINES = ("round_robin:lpm", "cache_aware:lpm", "client_rr:vtc")
VARIANTS = ("d2lpm:dlpm", "d2lpm:dlpm_light")
QW_SWEEP = Sweep("pair", "q_w", "Q^w", VARIANTS, BASELINES, (
    ("light_p99_s", "light P99 (s)"), ("flooder_hit_rate", "c0 hit rate"), ("throughput", "tokens/s")))


def sweep(names: list[str], qws: list[float], duration: float, dp: int,
          variants: tuple[str, ...] = VARIANTS) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        programs, engine, light, _ = scenario(name, duration)
        if name in PAPER:  # the papers' arrival rate scales with the workers
            wl = WorkloadConfig(workload=PAPER[name][0], scenario="s1", clients=4, duration=duration)
            programs = make_workload(wl, dp)
        runs = [(p, 0.0) for p in BASELINES] + [(p, q) for p in variants for q in qws]
        for pair, qw in runs:
            router, policy = pair.split(":")
            t0 = time.perf_counter()
            spec = RunSpec(None, ClusterSimConfig(dp=dp, max_time=20 * duration), engine,
                           admission=AdmissionConfig(policy=policy),
                           routing=RouterConfig(policy=router, quantum=qw or 16384.0))
            res = Simulator(spec, programs).run()
            row = {"scenario": name, "pair": pair, "q_w": qw, **measure(res, light),
                   "wall_s": round(time.perf_counter() - t0, 1)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--qws", default="1024,4096,16384,65536,262144")
    parser.add_argument("--scenarios", default="flood,tot-s1,judge-s1")
    parser.add_argument("--dp", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="router:policy pairs swept over Q^w")
    parser.add_argument("--json", default="")
    parser.add_argument("--plot", default="")
    args = parser.parse_args()
    qws = [float(q) for q in args.qws.split(",")]
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    if not variants or any(v.count(":") != 1 for v in variants):
        parser.error(f"--variants: router:policy pairs, comma-separated (got {args.variants!r})")
    report(sweep(names, qws, args.duration, args.dp, variants), args.json, args.plot,
           replace(QW_SWEEP, variants=variants))


if __name__ == "__main__":
    main()
