"""The simulator against the real CPU engine: the same workload on the SGLang CPU server (through
``sglang-fair bench``) and in the simulator with the fitted ``cpu-tiny-llama`` preset.

    sglang-fair lab fidelity OUT_DIR [--policies fcfs,lpm,vtc,dlpm] [--duration 20] [--dp 1]

For each policy: starts the server on the tiny model (``--schedule-policy P --enable-cache-report
--max-total-tokens 60000 --max-running-requests 8`` per worker; with ``--dp 2`` also ``--dp-size 2``
and ``--load-balance-method`` ``--router``), runs the workload (prompts as token ids, ``--token-ids``,
so the server sees the workload's lengths and prefixes), stops the server, simulates the same
programs, and writes ``OUT_DIR/runs.json`` (both summaries per policy), ``OUT_DIR/table.md``
(per-metric tables with relative errors) and one overlaid service-over-time plot per policy.
One server at a time, ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.harness.server import running_server
from sglang_fair.loadtest.cli import bench
from sglang_fair.loadtest.config import LoadTestConfig
from sglang_fair.loadtest.summary import run_summary
from sglang_fair.metrics import RunResult, summarize
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.report import plot_overlay, service_series
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig

ROOT = Path(__file__).resolve().parents[3]  # the checkout (its scripts/make_tiny_model.py)

KV_TOKENS = 60000
TINY_VOCAB = 388  # scripts/make_tiny_model.py's tokenizer (seed 0)
MAX_RUNNING = 8  # as the e2e tests: a queue forms, so the admission policy matters
METRICS = ("throughput", "cache_hit_rate", "jain_index", "well_behaved_p50_s", "well_behaved_p99_s",
           "makespan_s")


def real(model: Path, policy: str, router: str, dp: int, workload: WorkloadConfig, grace: float,
         log: Path, ids: bool = True) -> tuple[dict[str, Any], RunResult]:
    args = ["--schedule-policy", policy, "--enable-cache-report", "--max-total-tokens", str(KV_TOKENS),
            "--max-running-requests", str(MAX_RUNNING * dp)]
    if dp > 1:
        args += ["--load-balance-method", router]
    with running_server(model, args, log, timeout=600, dp_size=dp) as url:
        cfg = LoadTestConfig(base_url=url, grace=grace, token_ids=TINY_VOCAB if ids else 0)
        run, fairness = asyncio.run(bench(cfg, workload, CostModel(), 1.0, True))
    return run_summary(run, fairness), run.result()


def simulated(policy: str, router: str, dp: int,
              workload: WorkloadConfig, step_model: str = "") -> tuple[dict[str, Any], RunResult]:
    engine = EngineConfig(preset="cpu-tiny-llama", kv_tokens=KV_TOKENS, max_running=MAX_RUNNING,
                          ignore_eos=True, step_model=step_model)
    spec = RunSpec(workload, ClusterSimConfig(dp=dp), engine, admission=AdmissionConfig(policy=policy),
                   routing=RouterConfig(policy=router))
    res = Simulator(spec).run()
    return summarize(res), res


def rel(sim: float | None, real: float | None) -> str:
    if sim is None or real is None or real == 0:
        return "-"
    return f"{(sim - real) / real * 100:+.0f}%"


def shares(doc: dict[str, Any], until: float) -> dict[str, float]:
    """Each client's share of the service given in the first ``until`` seconds (while programs arrive
    and the clients compete; over a whole run every program finishes and the shares are the load's)."""
    series = doc["service_series"]
    got = {c: sum(s[: int(until / series["window"])]) for c, s in series["clients"].items()}
    total = sum(got.values()) or 1.0
    return {c: v / total for c, v in got.items()}


def tables(runs: dict[str, dict[str, dict[str, Any]]], until: float) -> str:
    out = []
    for key in METRICS:
        out += [f"\n**{key}**\n", "| run | real | sim | sim vs real |", "|---|---:|---:|---:|"]
        for name, pair in runs.items():
            r, s = pair["real"].get(key), pair["sim"].get(key)
            out.append(f"| {name} | {_fmt(r)} | {_fmt(s)} | {rel(s, r)} |")
        order = {side: " > ".join(sorted(runs, key=lambda n, side=side: -(runs[n][side].get(key) or 0)))  # type: ignore[misc]
                 for side in ("real", "sim")}
        same = "same" if order["real"] == order["sim"] else "differs"
        out.append(f"\nranking, real: {order['real']}; sim: {order['sim']} ({same})")
    if not all("service_series" in pair[side] for pair in runs.values() for side in ("real", "sim")):
        return "\n".join(out)
    clients = sorted(next(iter(runs.values()))["real"]["clients"])
    out += [f"\n**service share per client in the first {until:g} s** (real / sim)\n",
            "| run | " + " | ".join(clients) + " |", "|---|" + "---:|" * len(clients)]
    for name, pair in runs.items():
        rs, ss = shares(pair["real"], until), shares(pair["sim"], until)
        cells = " | ".join(f"{rs[c]:.3f} / {ss.get(c, 0):.3f}" for c in sorted(rs))
        out.append(f"| {name} | {cells} |")
    return "\n".join(out)


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) and abs(x) < 10 else f"{x:.0f}"


def resimulate(args: argparse.Namespace, workload: WorkloadConfig) -> int:
    """The simulated side of every run of ``--resim``'s runs.json again, the real side as it was."""
    runs = json.loads((args.resim / "runs.json").read_text())
    for name, pair in runs.items():
        router, _, policy = name.rpartition(":")  # "router:policy" with --dp 2
        pair["sim"], res = simulated(policy, router or args.router, args.dp, workload, args.step_model)
        pair["sim"]["service_series"] = service_series(res)
    (args.out / "runs.json").write_text(json.dumps(runs, indent=1))
    return publish(args.out, runs, args.share_until)


def publish(out: Path, runs: dict[str, dict[str, dict[str, Any]]], until: float) -> int:
    """Write OUT/table.md and print it."""
    text = tables(runs, until)
    (out / "table.md").write_text(text)
    print(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--policies", default="fcfs,lpm,vtc,dlpm")
    ap.add_argument("--router", default="round_robin")
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--workload", default="tot")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--rate", type=float, default=0.15)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--documents", type=int, default=200, help="qa: distinct documents")
    ap.add_argument("--context", type=int, default=8192,
                    help="the tiny model's context length (qa's documents need 65536)")
    ap.add_argument("--grace", type=float, default=150.0)
    ap.add_argument("--text", action="store_true", help="send text prompts instead of token ids")
    ap.add_argument("--share-until", type=float, default=30.0, help="service shares over [0, this] s")
    ap.add_argument("--table-only", action="store_true", help="rewrite table.md from OUT_DIR/runs.json")
    ap.add_argument("--step-model", default="",
                    help="the simulator's step model (python -m sglang_fair.sim.fit JSON), not the preset's")
    ap.add_argument("--resim", type=Path,
                    help="keep the real runs of this earlier OUT_DIR's runs.json; only simulate again")
    args = ap.parse_args()
    workload = WorkloadConfig(workload=args.workload, scenario="s1", clients=args.clients, rate=args.rate,
                              duration=args.duration, depth=args.depth, documents=args.documents)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.table_only:
        (args.out / "table.md").write_text(tables(json.loads((args.out / "runs.json").read_text()),
                                                  args.share_until))
        return 0
    if args.resim:
        return resimulate(args, workload)
    model = Path(tempfile.mkdtemp(prefix="fidelity-model-"))
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(model),
                    "--context", str(args.context)], check=True)
    path = args.out / "runs.json"
    runs: dict[str, dict[str, dict[str, Any]]] = json.loads(path.read_text()) if path.exists() else {}
    for policy in args.policies.split(","):
        name = f"{args.router}:{policy}" if args.dp > 1 else policy
        print(f"== {name}", file=sys.stderr, flush=True)
        real_doc, real_res = real(model, policy, args.router, args.dp, workload, args.grace,
                                  args.out / f"server_{policy}.log", not args.text)
        sim_doc, sim_res = simulated(policy, args.router, args.dp, workload, args.step_model)
        for doc, res in ((real_doc, real_res), (sim_doc, sim_res)):
            doc["service_series"] = service_series(res)
        runs[name] = {"real": real_doc, "sim": sim_doc}
        plot_overlay({"real": real_doc["service_series"], "sim": sim_doc["service_series"]},
                     args.out / f"overlay_{name.replace(':', '_')}.png",
                     title=f"{args.workload} s1, {name}: real CPU server (solid) vs simulator (dashed)")
        path.write_text(json.dumps(runs, indent=1))
    return publish(args.out, runs, args.share_until)


if __name__ == "__main__":
    raise SystemExit(main())
