#!/usr/bin/env python3
"""Which Q^u protects a light client? DLPM and dlpm_light over a Q^u sweep, beside LPM, FCFS and VTC.

    python scripts/sweep_quantum.py [--duration 30] [--qus 256,1024,4096,16384,65536]
        [--json results/quantum_sweep.json] [--plot docs/img/quantum_sweep.png]

Scenarios, one simulated A100 + Llama-3.1-8B worker each:
  flood        a client floods 48 closed-loop streams of requests sharing a 2,048-token prefix, a
               backlogged client keeps 8 unique 1,024-token requests in flight, two light clients
               send one short unique request at a time (latency per request); 24 running requests at most;
               the cache holds the working set (the CPU engine scenario of docs/serving.md, scaled)
  flood-mem    the same with a 12,000-token KV pool: the prefix competes with the rest for memory
  qa-s1, tot-s1, judge-s1
               the papers' workloads, misbehaving client c0 (000 Table 3), with a KV pool small
               enough that switching clients costs prefix recomputation
Per run: light P99 (flood: the two light clients' requests; paper workloads: the well-behaved
clients' programs; unfinished ones count as waiting until the end of the run), the
flooding client's (c0's) cache hit rate, throughput (perceived service per second) and the largest
service gap between backlogged clients and Jain's index of the clients' service rates.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from sglang_fair.admission import AdmissionConfig  # noqa: E402
from sglang_fair.metrics import RunResult, percentile, summarize  # noqa: E402
from sglang_fair.routing import RouterConfig  # noqa: E402
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig  # noqa: E402
from sglang_fair.sim.simulator import Simulator  # noqa: E402
from sglang_fair.sim.spec import RunSpec  # noqa: E402
from sglang_fair.workloads import WorkloadConfig, make_workload  # noqa: E402
from sglang_fair.workloads.program import Call, Program  # noqa: E402
from sglang_fair.workloads.tokens import random_tokens, seeded_rng  # noqa: E402

BASELINES = ("lpm", "fcfs", "vtc")
VARIANTS = ("dlpm", "dlpm_light")
PAPER = {"qa-s1": ("qa", 30_000), "tot-s1": ("tot", 6_000), "judge-s1": ("judge", 8_000)}


def flood_programs(duration: float, seed: int = 0) -> list[Program]:
    """Flooder c0 (48 chains over one prefix), backlogged c1 (8 chains), light l1, l2 (open loop)."""
    rng = seeded_rng("flood", seed)
    prefix = random_tokens(rng, 2048)
    chain_len = int(duration * 4) + 8
    raw: list[tuple[str, float, tuple[Call, ...], bool]] = []
    for _ in range(48):
        calls = tuple(Call((prefix, random_tokens(rng, 24)), 64, (i - 1,) if i else ())
                      for i in range(chain_len))
        raw.append(("c0", 0.0, calls, True))
    for _ in range(8):
        calls = tuple(Call((random_tokens(rng, 1024),), 64, (i - 1,) if i else ())
                      for i in range(chain_len))
        raw.append(("c1", 0.0, calls, True))
    for client in ("l1", "l2"):
        calls = tuple(Call((random_tokens(rng, 160),), 32, (i - 1,) if i else ()) for i in range(chain_len))
        raw.append((client, 0.0, calls, False))
    raw.sort(key=lambda x: x[1])
    return [Program(pid, c, t, calls, seed, bad, "e2e", "flood")
            for pid, (c, t, calls, bad) in enumerate(raw)]


def measure(res: RunResult, light: tuple[str, ...] | None) -> dict[str, Any]:
    s = summarize(res)
    c0 = [r for r in res.requests if r.client == "c0" and r.admitted >= 0]
    end = res.end_time  # a request or program unfinished at the end counts as waiting until then
    if light is None:
        lat = [end - p.arrival if (x := p.latency()) is None else x
               for p in res.programs if not p.misbehaving]
    else:
        lat = [(r.finished if r.finished >= 0 else end) - r.arrival
               for r in res.requests if r.client in light]
    p99 = round(percentile(lat, 99), 4) if lat else None
    return {
        "light_p99_s": p99,
        "flooder_hit_rate": round(sum(r.cached_len for r in c0) / max(1, sum(r.input_len for r in c0)), 4),
        "throughput": s["throughput"],
        "jain_index": s["jain_index"],
        "max_backlogged_service_diff": s["max_backlogged_service_diff"],
    }


def scenario(name: str, duration: float) -> tuple[list[Program], EngineConfig, tuple[str, ...] | None, int]:
    """Programs, engine, light clients (None: the well-behaved ones) and L_input + M for U."""
    if name.startswith("flood"):
        kv = 12_000 if name == "flood-mem" else 0
        return flood_programs(duration), EngineConfig(kv_tokens=kv, max_running=24), ("l1", "l2"), 2072
    workload, kv = PAPER[name]
    wl = WorkloadConfig(workload=workload, scenario="s1", clients=4, duration=duration)
    return make_workload(wl, 1), EngineConfig(kv_tokens=kv, max_running=256), None, 0  # as published


def sweep(names: list[str], qus: list[float], duration: float) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        programs, engine, light, _ = scenario(name, duration)
        runs = [(p, 0.0) for p in BASELINES] + [(p, q) for p in VARIANTS for q in qus]
        for policy, qu in runs:
            t0 = time.perf_counter()
            spec = RunSpec(None, ClusterSimConfig(max_time=20 * duration), engine,
                           admission=AdmissionConfig(policy=policy, quantum=qu or 4096.0),
                           routing=RouterConfig(policy="round_robin"))
            res = Simulator(spec, programs).run()
            row = {"scenario": name, "policy": policy, "q_u": qu, **measure(res, light),
                   "wall_s": round(time.perf_counter() - t0, 1)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


@dataclass(frozen=True)
class Sweep:
    """How a sweep's rows read: the key naming a run, the swept quantum and what the plot shows."""

    who: str  # "policy" or "pair"
    q: str  # "q_u" or "q_w"
    label: str
    variants: tuple[str, ...]
    baselines: tuple[str, ...]
    panels: tuple[tuple[str, str], ...] = (("light_p99_s", "light P99 (s)"),
                                           ("flooder_hit_rate", "c0 hit rate"))


QU_SWEEP = Sweep("policy", "q_u", "Q^u", VARIANTS, BASELINES)


def table(rows: list[dict[str, Any]], sweep: Sweep = QU_SWEEP) -> str:
    width = max(len(sweep.who), *(len(r[sweep.who]) for r in rows))
    lines = [f"{'scenario':<9} {sweep.who:<{width}} {sweep.label:>7} {'light P99 s':>11} {'c0 hit':>7} "
             f"{'thr tok/s':>10} {'Jain':>6}"]
    for r in rows:
        q = f"{r[sweep.q]:g}" if r[sweep.q] else "-"
        p99 = "-" if r["light_p99_s"] is None else f"{r['light_p99_s']:.2f}"
        lines.append(f"{r['scenario']:<9} {r[sweep.who]:<{width}} {q:>7} {p99:>11} "
                     f"{r['flooder_hit_rate']:>7.4f} {r['throughput']:>10.0f} {r['jain_index']:>6.3f}")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, sweep: Sweep = QU_SWEEP) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["scenario"] for r in rows))
    panels = sweep.panels
    fig, axes = plt.subplots(len(panels), len(names), figsize=(3.2 * len(names), 2.75 * len(panels)),
                             squeeze=False)
    for j, name in enumerate(names):
        mine = [r for r in rows if r["scenario"] == name]
        for i, (key, label) in enumerate(panels):
            ax = axes[i][j]
            for run, style in zip(sweep.variants, ("o-", "s-"), strict=True):
                pts = [(r[sweep.q], r[key]) for r in mine if r[sweep.who] == run]
                ax.plot([q for q, _ in pts], [v for _, v in pts], style, label=run)
            for run, color in zip(sweep.baselines, ("grey", "tab:green", "tab:red"), strict=True):
                val = next(r[key] for r in mine if r[sweep.who] == run)
                if val is not None:
                    ax.axhline(val, color=color, ls="--", lw=1, label=run)
            ax.set_xscale("log", base=2)
            if key == "light_p99_s":
                ax.set_yscale("log")
            if i == 0:
                ax.set_title(name)
            if i == len(panels) - 1:
                ax.set_xlabel(sweep.label)
            if j == 0:
                ax.set_ylabel(label)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def report(rows: list[dict[str, Any]], json_path: str, plot_path: str, sweep: Sweep = QU_SWEEP) -> None:
    """Print the table; write the rows as JSON and the plot where asked."""
    print(table(rows, sweep))
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))
    if plot_path:
        plot(rows, Path(plot_path), sweep)
        print(f"wrote {plot_path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--qus", default="256,1024,4096,16384,65536")
    parser.add_argument("--scenarios", default="flood,flood-mem,qa-s1,tot-s1,judge-s1")
    parser.add_argument("--json", default="")
    parser.add_argument("--plot", default="")
    args = parser.parse_args()
    qus = [float(q) for q in args.qus.split(",")]
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    report(sweep(names, qus, args.duration), args.json, args.plot)


if __name__ == "__main__":
    main()
