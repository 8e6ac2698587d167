#!/usr/bin/env python3
"""A light client beside a flood under each batch-formation policy and admission policy.

    python scripts/batching_light_client.py [--duration 10]

The ``flood`` scenario of ``scripts/sweep_quantum.py`` (a client flooding requests that share a 2,048-token
prefix, a backlogged client, two light clients sending one short request at a time; one simulated A100 +
Llama-3.1-8B worker, 24 running requests at most), run with each admission policy (dlpm_light, dlpm, fcfs)
and each batching policy at its defaults. Prints the light clients' P99 latency, throughput, Jain's index,
the largest backlogged service gap, median TTFT and P99 TPOT (003's SLOs: 2 s / 50 ms).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "python"))
sys.path.insert(0, str(ROOT))

import sweep_quantum as sq  # noqa: E402
from sglang_fair.admission import AdmissionConfig  # noqa: E402
from sglang_fair.batching import BATCHING_POLICIES, BatchingConfig  # noqa: E402
from sglang_fair.routing import RouterConfig  # noqa: E402
from sglang_fair.sim.config import ClusterSimConfig  # noqa: E402
from sglang_fair.sim.simulator import Simulator  # noqa: E402
from sglang_fair.sim.spec import RunSpec  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=10.0, help="seconds of arrivals")
    p.add_argument("--policies", default="dlpm_light,dlpm,fcfs", help="admission policies")
    args = p.parse_args()
    programs, engine, light, _ = sq.scenario("flood", args.duration)
    print(f"{'admission':<10} {'batching':<12} {'light P99 s':>11} {'thr tok/s':>9} {'Jain':>6} "
          f"{'max diff':>9} {'TTFT p50 s':>10} {'TPOT p99 ms':>11}")
    for policy in args.policies.split(","):
        for batching in BATCHING_POLICIES.names():
            t0 = time.perf_counter()
            spec = RunSpec(None, ClusterSimConfig(max_time=20 * args.duration), engine,
                           admission=AdmissionConfig(policy=policy),
                           routing=RouterConfig(policy="round_robin"),
                           batching=BatchingConfig(policy=batching), slo=True)
            sim = Simulator(spec, programs)
            res = sim.run()
            assert sim.slo is not None
            m, s = sq.measure(res, light), sim.slo.summary(args.duration)
            print(f"{policy:<10} {batching:<12} {m['light_p99_s']:>11.2f} {m['throughput']:>9.0f} "
                  f"{m['jain_index']:>6.3f} {m['max_backlogged_service_diff']:>9.0f} {s['ttft_p50']:>10.2f} "
                  f"{s['tpot_p99'] * 1000:>11.0f}   ({time.perf_counter() - t0:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
