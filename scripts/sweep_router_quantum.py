#!/usr/bin/env python3
"""Which Q^w? D²LPM over a router-quantum sweep on two workers, beside RR+LPM, cache-aware+LPM and VTC.

    python scripts/sweep_router_quantum.py [--duration 20] [--qws 1024,4096,16384,65536,262144]
        [--scenarios flood,tot-s1,judge-s1] [--dp 2] [--json docs/router_quantum_sweep.json]
        [--plot docs/img/router_quantum_sweep.png]

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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sglang_fair.admission import AdmissionConfig
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.workloads import WorkloadConfig, make_workload
from sweep_quantum import PAPER, measure, scenario

BASELINES = ("round_robin:lpm", "cache_aware:lpm", "client_rr:vtc")
VARIANTS = ("d2lpm:dlpm", "d2lpm:dlpm_light")


def sweep(names: list[str], qws: list[float], duration: float, dp: int) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        programs, engine, light, _ = scenario(name, duration)
        if name in PAPER:  # the papers' arrival rate scales with the workers
            wl = WorkloadConfig(workload=PAPER[name][0], scenario="s1", clients=4, duration=duration)
            programs = make_workload(wl, dp)
        runs = [(p, 0.0) for p in BASELINES] + [(p, q) for p in VARIANTS for q in qws]
        for pair, qw in runs:
            router, policy = pair.split(":")
            t0 = time.perf_counter()
            res = Simulator(ClusterSimConfig(dp=dp, router=router, policy=policy), engine, programs,
                            horizon=duration, admission=AdmissionConfig(quantum=0.0),
                            routing=RouterConfig(quantum=qw or 16384.0)).run()
            row = {"scenario": name, "pair": pair, "q_w": qw, **measure(res, light),
                   "wall_s": round(time.perf_counter() - t0, 1)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'scenario':<9} {'pair':<17} {'Q^w':>7} {'light P99 s':>11} {'c0 hit':>7} "
             f"{'thr tok/s':>10} {'Jain':>6}"]
    for r in rows:
        q = f"{r['q_w']:g}" if r["q_w"] else "-"
        p99 = "-" if r["light_p99_s"] is None else f"{r['light_p99_s']:.2f}"
        lines.append(f"{r['scenario']:<9} {r['pair']:<17} {q:>7} {p99:>11} {r['flooder_hit_rate']:>7.4f} "
                     f"{r['throughput']:>10.0f} {r['jain_index']:>6.3f}")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["scenario"] for r in rows))
    panels = (("light_p99_s", "light P99 (s)"), ("flooder_hit_rate", "c0 hit rate"),
              ("throughput", "tokens/s"))
    fig, axes = plt.subplots(len(panels), len(names), figsize=(3.3 * len(names), 7.5), squeeze=False)
    for j, name in enumerate(names):
        mine = [r for r in rows if r["scenario"] == name]
        for i, (key, label) in enumerate(panels):
            ax = axes[i][j]
            for pair, style in zip(VARIANTS, ("o-", "s-"), strict=True):
                pts = [(r["q_w"], r[key]) for r in mine if r["pair"] == pair]
                ax.plot([q for q, _ in pts], [v for _, v in pts], style, label=pair)
            for pair, color in zip(BASELINES, ("grey", "tab:green", "tab:red"), strict=True):
                val = next(r[key] for r in mine if r["pair"] == pair)
                if val is not None:
                    ax.axhline(val, color=color, ls="--", lw=1, label=pair)
            ax.set_xscale("log", base=2)
            ax.set_title(name if i == 0 else "")
            ax.set_xlabel("Q^w" if i == len(panels) - 1 else "")
            if j == 0:
                ax.set_ylabel(label)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--qws", default="1024,4096,16384,65536,262144")
    parser.add_argument("--scenarios", default="flood,tot-s1,judge-s1")
    parser.add_argument("--dp", type=int, default=2)
    parser.add_argument("--json", default="")
    parser.add_argument("--plot", default="")
    args = parser.parse_args()
    qws = [float(q) for q in args.qws.split(",")]
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    rows = sweep(names, qws, args.duration, args.dp)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.plot:
        plot(rows, Path(args.plot))
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
