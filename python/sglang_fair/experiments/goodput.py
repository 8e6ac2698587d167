"""Goodput against load for the batch-formation policies, on the Azure or Mooncake trace.

    sglang-fair lab goodput [--trace azure|mooncake|PATH] [--trace-start 180] [--trace-window 300]
        [--scales 0.05,0.1,...] [--policies sglang,sarathi,fairbatching,slai] [--dp 1]
        [--json results/batching_goodput.json] [--plot docs/img/batching_goodput.png] [--jobs 1]

Each run replays ``--trace-window`` seconds of the trace (``--trace``: the Azure 2023 code trace by default;
``mooncake`` is the Mooncake conversation trace, prefixes shared by its hash ids) from
``--trace-start`` seconds in (its first three minutes hold only 63 requests), its arrival times
divided by a scale factor (0.5: half the load), on ``--dp`` simulated A100 + Llama-3.1-8B workers
(public-figure roofline preset), FCFS admission, with FairBatching's Azure SLOs ([3] Table 2: TTFT
2 s, TPOT 50 ms; ``--ttft``, ``--tpot``). Goodput is the number of requests meeting both targets per second of
arrivals ([3]'s effective RPS); TPOT is the worst running average per request, as [3] measures it.
Sarathi and SLAI run once per token budget of ``--budgets`` ([3] tunes Sarathi's per test case;
[4] uses 512 for a 0.1 s TBT target); FairBatching and SGLang use their defaults (a time budget
under an 8192-token cap; SGLang's chunk size for the preset).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.batching import BATCHING_POLICIES, BatchingConfig
from sglang_fair.experiments.runner import Task, floats, ints, names, run_tasks, save_json
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig
from sglang_fair.workloads.config import DEFAULT_DATA_DIR

DATA = Path(DEFAULT_DATA_DIR)
TRACES = {"azure": DATA / "azure_llm_2023" / "AzureLLMInferenceTrace_code.csv",
          "mooncake": DATA / "mooncake" / "conversation_trace.jsonl"}


def variants(policies: list[str], budgets: list[int], orders: list[str],
             router: str) -> list[tuple[str, str, int, str, str]]:
    """(label, policy, token budget, slai's prefill order, router) of every run per load: sarathi
    and slai once per budget, slai once per order; ``name@router`` overrides ``router``."""
    out: list[tuple[str, str, int, str, str]] = []
    for item in policies:
        name, _, via = item.partition("@")
        tag, via = (f"@{via}", via) if via else ("", router)
        if name == "sarathi":
            out += [(f"{name}-{b}{tag}", name, b, "spf", via) for b in budgets]
        elif name == "slai":
            out += [(f"{name}-{b}-{o}{tag}", name, b, o, via) for b in budgets for o in orders]
        else:
            out.append((name + tag, name, 0, "spf", via))
    return out


def cut_trace(src: Path, dst: Path, start: float, window: float) -> int:
    """Copy the rows of ``src`` arriving in [first + start, first + start + window): the Azure CSV
    (``TIMESTAMP`` date-times) or the Mooncake JSONL (``timestamp`` in ms); ``dst`` gets the suffix."""
    if src.suffix == ".jsonl":
        lines = [ln for ln in src.read_text().splitlines() if ln.strip()]
        ms = [float(json.loads(ln)["timestamp"]) for ln in lines]
        kept = [ln for ln, t in zip(lines, ms, strict=True) if start <= (t - ms[0]) / 1000 < start + window]
        dst.write_text("\n".join(kept) + "\n")
        return len(kept)
    with src.open() as f:
        rows = list(csv.reader(f))
    times = [datetime.fromisoformat(r[0][:26]).timestamp() for r in rows[1:]]
    keep = [r for r, t in zip(rows[1:], times, strict=True) if start <= t - times[0] < start + window]
    with dst.open("w", newline="") as f:
        csv.writer(f).writerows([rows[0], *keep])
    return len(keep)


def run_one(args: argparse.Namespace, scale: float, policy: str, budget: int, order: str,
            router: str) -> dict[str, Any]:
    """One replay of the cut trace at load ``scale``; the SLO summary with the offered load."""
    duration = args.trace_window / scale
    wl = WorkloadConfig(workload="trace", trace_file=str(args.cut), duration=duration,
                        time_scale=scale, clients=args.clients)
    batching = BatchingConfig(policy=policy, token_budget=budget, ttft=args.ttft, tpot=args.tpot,
                              prefill_order=order, slo_classes=args.slo_classes,
                              client_classes=args.client_classes)
    spec = RunSpec(wl, ClusterSimConfig(dp=args.dp), admission=AdmissionConfig(policy="fcfs"),
                   routing=RouterConfig(policy=router), batching=batching, slo=True)
    programs = spec.programs()
    sim = Simulator(spec, programs)
    t0 = time.perf_counter()
    res = sim.run()
    assert sim.slo is not None
    out = sim.slo.summary(duration)
    out.update(scale=scale, offered_rps=len(programs) / duration, wall_s=time.perf_counter() - t0,
               steps=res.steps, finished=sum(r.finished >= 0 for r in res.requests))
    return out


def _print_run(task: Task, r: dict[str, Any]) -> None:
    print(f"{task.key:<24} {r['scale']:>6.2f} {r['offered_rps']:>6.2f} {r['goodput']:>8.2f} "
          f"{r['slo_attainment']:>6.1%} {r['ttft_p50']:>7.2f}/{r['ttft_p99']:<7.2f} "
          f"{r['tpot_p50'] * 1000:>7.0f}/{r['tpot_p99'] * 1000:<8.0f} {r['wall_s']:>7.1f}", flush=True)


def plot(results: dict[str, list[dict[str, Any]]], path: Path, title: str, ttft: float, tpot: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for label, runs in results.items():
        x = [r["offered_rps"] for r in runs]
        axes[0].plot(x, [r["goodput"] for r in runs], marker="o", label=label)
        axes[1].plot(x, [r["ttft_p99"] for r in runs], marker="o", label=label)
        axes[2].plot(x, [r["tpot_p99"] * 1000 for r in runs], marker="o", label=label)
    axes[1].axhline(ttft, color="grey", linestyle="--", linewidth=1)
    axes[2].axhline(tpot * 1000, color="grey", linestyle="--", linewidth=1)
    axes[0].set_ylabel("goodput (requests/s meeting TTFT and TPOT)")
    axes[1].set_ylabel("P99 TTFT (s)")
    axes[1].set_yscale("log")
    axes[2].set_ylabel("P99 TPOT (ms)")
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("offered load (requests/s)")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default="azure",
                   help=f"{' or '.join(TRACES)} (the shipped data sets), or a trace file's path")
    p.add_argument("--trace-start", type=float, default=180.0, help="seconds into the trace")
    p.add_argument("--trace-window", type=float, default=300.0, help="seconds of the trace replayed")
    p.add_argument("--scales", default="0.05,0.1,0.15,0.2,0.3,0.4,0.5,0.75",
                   help="load factors (time_scale)")
    p.add_argument("--policies", default=",".join(["sglang", "sarathi", "fairbatching", "slai"]),
                   help="batching policies; name@router picks the router of that run (fairbatching@pab)")
    p.add_argument("--budgets", default="256,512", help="token budgets of sarathi and slai")
    p.add_argument("--slai-orders", default="spf,fcfs", help="slai's prefill orders")
    p.add_argument("--slo-classes", default="", help="e.g. paying=2/0.1,free=2/0.5 ([4]'s classes)")
    p.add_argument("--client-classes", default="", help="e.g. c0=paying (with --clients 20: 5%% paying)")
    p.add_argument("--ttft", type=float, default=2.0)
    p.add_argument("--tpot", type=float, default=0.05)
    p.add_argument("--dp", type=int, default=1)
    p.add_argument("--router", default="shortest_queue", help="router when --dp > 1")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None)
    p.add_argument("--jobs", type=int, default=1, help="processes at a time")
    args = p.parse_args(argv)
    args.trace = TRACES.get(args.trace, Path(args.trace))
    if not args.trace.exists():
        print(f"error: trace {args.trace} not found (--trace)", file=sys.stderr)
        return 2
    policies = names(args.policies)
    for name in (s.partition("@")[0] for s in policies):
        if name not in BATCHING_POLICIES:
            print(f"error: unknown batching policy {name!r}; known: {', '.join(BATCHING_POLICIES)}",
                  file=sys.stderr)
            return 2
    tmp = tempfile.TemporaryDirectory()
    args.cut = Path(tmp.name) / ("trace" + args.trace.suffix)
    n = cut_trace(args.trace, args.cut, args.trace_start, args.trace_window)
    print(f"{n} requests from {args.trace_start:g} s to {args.trace_start + args.trace_window:g} s of "
          f"{args.trace.name}")
    router = "round_robin" if args.dp == 1 else args.router
    runs = variants(policies, ints(args.budgets), args.slai_orders.split(","), router)
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in runs}
    print(f"{'policy':<24} {'load':>6} {'rps':>6} {'goodput':>8} {'met':>6} {'TTFT p50/p99 s':>15} "
          f"{'TPOT p50/p99 ms':>16} {'wall s':>7}")
    tasks = [Task(label, run_one, (args, scale, policy, budget, order, via))
             for scale in floats(args.scales) for label, policy, budget, order, via in runs]
    for task, r in zip(tasks, run_tasks(tasks, args.jobs, _print_run), strict=True):
        results[task.key].append(r)
    print("\npeak goodput (requests/s):")
    for label, rs in results.items():
        best = max(rs, key=lambda r: r["goodput"])
        print(f"  {label:<24} {best['goodput']:.2f} at {best['offered_rps']:.2f} rps offered")
    config = {k: (str(v) if isinstance(v, Path) else v)
              for k, v in vars(args).items() if k not in ("cut", "jobs")}
    if args.trace.is_relative_to(DATA):  # the shipped copy, named as in the package
        config["trace"] = str(args.trace.relative_to(DATA.parents[1]))
    if args.json:
        save_json(args.json, {"config": config, "runs": results}, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        name = {v: k for k, v in TRACES.items()}.get(args.trace, args.trace.stem).capitalize()
        plot(results, args.plot, f"{name} trace, {args.dp} x A100 + Llama-3.1-8B (simulated), "
                                 f"SLO TTFT {args.ttft:g} s / TPOT {args.tpot * 1000:g} ms (dashed)",
             args.ttft, args.tpot)
        print(f"wrote {args.plot}")
    return 0
