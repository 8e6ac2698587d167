#!/usr/bin/env python3
"""Reproduce the evaluation of 000 (DLPM / D²LPM, §6-7) in the simulator, under a stated protocol.

    nice -n 10 python scripts/reproduce_paper.py > /tmp/rp.log 2>&1      # everything (~1 CPU-hour)
    python scripts/reproduce_paper.py --only fig1,fig12 --seeds 0,1,2      # a subset
    python scripts/reproduce_paper.py --redraw                             # plots/tables from results.json

Protocol (docs/results.md, "Protocol"; sglang_fair/experiments/protocol.py): arrivals sustained for
--duration (600 s), metrics over [--warmup, --duration], latency over the programs arriving in
[--warmup, --duration - --cooldown]; every point at a named load (below 0.7x, near 1.0x, above 1.2x)
of the capacity measured with RR+LPM for its workload x scenario x D x preset (experiments/capacity.py); one
run per seed (--seeds, at least 3), --jobs processes at a time. Every run is appended to
results/results.json as it finishes; a rerun skips the runs already there (delete the file to start
over). Nothing is tuned to the paper; the presets are public-figure ones, not GPU-calibrated.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from sglang_fair.experiments.protocol import LOADS, Point, Protocol, measure_capacity, run_point  # noqa: E402
from sglang_fair.workloads import DEFAULT_RATE_PER_WORKER  # noqa: E402

A10 = "a10-llama3b"
A10_8B = "a10-llama8b"  # Fig. 1's A10 with the 8B model: a 15,716-token pool, so requests wait for memory
# Preble: E2 routing + its priority wait queue; the last: the default pair of serve, sim and bench, and
# cache-aware routing with the same workers before it
PAIRS = [("round_robin", "lpm"), ("preble", "preble"), ("cache_aware", "lpm"), ("client_rr", "vtc"),
         ("d2lpm", "dlpm"), ("d2lpm_guarded", "dlpm"), ("cache_aware", "dlpm_light"),
         ("fair_cache_aware", "dlpm_light")]
PER_WORKER = ("preble", "cache_aware", "d2lpm_guarded", "fair_cache_aware")  # equal RR (or D²LPM) at D = 1
SERIES_FIGS = ("fig8", "fig9", "fig12")


def _pairs(dp: int, guarded: bool = True) -> list[tuple[str, str]]:
    """000 omits Preble at D = 1; cache-aware routing and the guarded router have one choice there."""
    return [p for p in PAIRS if dp > 1 or p[0] not in PER_WORKER
            if guarded or p[0] != "d2lpm_guarded"]


def experiments(a: argparse.Namespace) -> dict[str, list[Point]]:
    """Every figure's points, in the order they run (cheap and central first)."""
    fig1 = [("lpm", 0.0), ("vtc", 0.0)] + [("dlpm", q) for q in a.qus]
    figs: dict[str, list[Point]] = {
        "fig1": [Point("tot", "s1", 1, A10, policy=p, q_u=q, load=ld) for ld in a.fig_loads for p, q in fig1],
        "fig1mem": [Point("tot", "s1", 1, A10_8B, policy=p, q_u=q, load=ld)
                    for ld in a.fig_loads for p, q in fig1],
        "fig12": [Point("mix", dp=1, preset=A10, policy=p, load=ld)
                  for ld in ("below", "near", "above") for p in ("lpm", "vtc", "dlpm")],
        "fig8": [Point("arena", dp=2, preset=A10, router=r, policy=p, load=ld)
                 for ld in a.fig_loads for r, p in _pairs(2)],
        "fig7": [Point(wl, sc, dp, router=r, policy=p)
                 for wl in a.workloads for sc in ("s1", "s2") for dp in (a.qa_dps if wl == "qa" else a.dps)
                 for r, p in _pairs(dp)],
        "fig10": [Point("tot", sc, dp, router=r, policy=p, q_w=qw, load=ld)
                  for ld in a.fig_loads for dp in a.fig10_dps for sc in ("s1", "none") for r, p in _pairs(dp)
                  for qw in (a.qws if r.startswith("d2lpm") else [0.0])],
        "fig9": [Point("tot", "s2", 4, A10, router=r, policy=p, branches=3, load=ld)
                 for ld in a.fig_loads for r, p in _pairs(4)],
        "fig11": [Point("tot", dp=1, preset=A10, policy=p, clients=n, load=ld)
                  for ld in a.fig_loads for n in a.clients for p in ("lpm", "vtc", "dlpm")],
        "qw_locality": [Point(wl, sc, dp, router=r, policy=p, q_w=qw, load=ld)  # q_w 0: the default
                        for wl in a.locality_workloads for sc in a.locality_scenarios for dp in a.locality_dps
                        for ld in a.locality_loads for r, p in _pairs(dp)
                        for qw in ([0.0, *a.locality_qws] if r.startswith("d2lpm") else [0.0])],
        "loads": [Point(wl, sc, dp, router=r, policy=p, load=ld)
                  for dp in a.load_dps for wl in a.load_workloads for sc in a.load_scenarios
                  for ld in ("below", "near", "above") for r, p in _pairs(dp)],
    }
    return {name: figs[name] for name in a.only}


def _start(point: Point) -> float:
    if point.workload == "arena":
        return 5.0  # time scale: 12.5 conversations/s
    per_worker = DEFAULT_RATE_PER_WORKER[point.workload] * (0.1 if point.preset in (A10, A10_8B) else 0.2)
    return per_worker * point.dp / (2.0 if point.scenario == "s1" else 1.0)


def _nice() -> None:
    os.nice(max(0, 10 - os.nice(0)))  # at least nice 10: the machine is shared


def _save(path: Path, results: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, separators=(",", ":")))
    tmp.replace(path)


def _log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def run(a: argparse.Namespace) -> dict[str, Any]:
    proto = Protocol(duration=a.duration, warmup=a.warmup, cooldown=a.cooldown,
                     capacity_duration=a.duration, capacity_warmup=a.duration / 4)
    path = Path(a.results)
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if results.get("protocol") != asdict(proto):
        if results.get("runs") or results.get("capacity"):
            raise SystemExit(f"{path} holds runs of another protocol ({results.get('protocol')}): "
                             "move it away or pass that protocol's flags")
        results = {"protocol": asdict(proto), "capacity": {}, "runs": [], "figures": {}}
    figs = experiments(a)
    for name, points in figs.items():  # a figure's points accumulate over invocations
        known = results["figures"].setdefault(name, [])
        known.extend(k for k in dict.fromkeys(p.key() for p in points) if k not in known)
    with ProcessPoolExecutor(max_workers=a.jobs, initializer=_nice) as pool:
        combos = {p.combo(): p for points in figs.values() for p in points}
        combos = dict(sorted(combos.items(), key=lambda kv: kv[1].workload == "qa"))  # costliest last
        todo = {pool.submit(measure_capacity, p, proto, _start(p)): c
                for c, p in combos.items() if c not in results["capacity"]}
        for fut in as_completed(todo):
            cap = fut.result()
            results["capacity"][todo[fut]] = cap
            _save(path, results)
            _log(f"capacity {todo[fut]}: {cap['capacity']:.4g} (trials {cap['trials']}, "
                 f"{cap['cpu_s']} CPU s)")
        if a.capacity_only:
            return results
        done = {(r["key"], r["seed"]) for r in results["runs"]}
        series = {p.key() for n in SERIES_FIGS if n in figs for p in figs[n]}
        runs: dict[Future[dict[str, Any]], str] = {}
        ordered = sorted((p for points in figs.values() for p in points), key=lambda p: p.workload == "qa")
        for p in ordered:
            for seed in a.seeds:
                if (p.key(), seed) in done:
                    continue
                done.add((p.key(), seed))
                cap = results["capacity"][p.combo()]["capacity"]
                runs[pool.submit(run_point, p, cap, proto, seed, p.key() in series)] = p.key()
        _log(f"{len(runs)} runs to do")
        for i, fut in enumerate(as_completed(runs), 1):
            row = fut.result()
            results["runs"].append(row)
            _save(path, results)
            _log(f"[{i}/{len(runs)}] {row['workload']} {row['scenario']} D={row['dp']} {row['scheduler']} "
                 f"q_u={row['q_u']:g} q_w={row['q_w']:g} {row['load']} seed {row['seed']}: "
                 f"thr {row['throughput']:.0f} jain {row['jain_index']:.3f} "
                 f"p99 {row['well_behaved_p99_s']} ({row['cpu_s']} CPU s)")
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", default="fig1,fig1mem,fig12,fig8,fig7,fig10,fig9,fig11,loads,qw_locality")
    p.add_argument("--duration", type=float, default=600.0, help="seconds of sustained arrivals per run")
    p.add_argument("--warmup", type=float, default=120.0, help="seconds left out at the start")
    p.add_argument("--cooldown", type=float, default=120.0,
                   help="latency over arrivals up to --duration minus this (they finish under load)")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--jobs", type=int, default=2, help="processes at a time (each at nice >= 10)")
    p.add_argument("--dps", default="1,2,4", help="fig7's data-parallel degrees (the paper: 1,2,4,8)")
    p.add_argument("--workloads", default="tot,judge,qa", help="fig7's workloads")
    p.add_argument("--qa-dps", default="1,2", help="fig7's D for QA (the costliest workload to simulate)")
    p.add_argument("--qus", default="1024,4096,16384,65536", help="fig1's DLPM quanta")
    p.add_argument("--qws", default="2048,16384,131072", help="fig10's D²LPM quanta")
    p.add_argument("--fig10-dps", default="4", help="fig10's data-parallel degrees (the paper: 8)")
    p.add_argument("--locality-qws", default="131072,1048576,8388608",
                   help="qw_locality's D²LPM quanta besides the default (why Preble and cache-aware lead)")
    p.add_argument("--locality-workloads", default="qa,judge", help="qw_locality's workloads")
    p.add_argument("--locality-scenarios", default="s1", help="qw_locality's scenarios")
    p.add_argument("--locality-dps", default="8", help="qw_locality's data-parallel degrees")
    p.add_argument("--locality-loads", default="near", help="qw_locality's named loads")
    p.add_argument("--clients", default="5,10,20,50", help="fig11's client counts")
    p.add_argument("--fig-loads", default="above",
                   help="named loads of fig1, fig1mem, fig8, fig9, fig10, fig11 (below,near,above)")
    p.add_argument("--load-workloads", default="tot,judge", help="the named-load sweep's workloads")
    p.add_argument("--load-scenarios", default="s1", help="the named-load sweep's scenarios")
    p.add_argument("--load-dps", default="4", help="the named-load sweep's data-parallel degrees")
    p.add_argument("--out", default=str(ROOT / "docs"), help="where the images (img/) and results_tables.md go")
    p.add_argument("--results", default=str(ROOT / "results" / "results.json"), help="every run, kept as it finishes")
    p.add_argument("--capacity-only", action="store_true", help="measure the capacities, run nothing else")
    p.add_argument("--redraw", action="store_true", help="only redraw plots and tables from results.json")
    a = p.parse_args(argv)
    a.only = a.only.split(",")
    a.seeds = [int(x) for x in a.seeds.split(",")]
    a.dps = [int(x) for x in a.dps.split(",")]
    a.qa_dps = [int(x) for x in a.qa_dps.split(",")]
    a.fig10_dps = [int(x) for x in a.fig10_dps.split(",")]
    a.workloads = a.workloads.split(",")
    a.fig_loads = a.fig_loads.split(",")
    a.load_workloads = a.load_workloads.split(",")
    a.load_scenarios = a.load_scenarios.split(",")
    a.load_dps = [int(d) for d in a.load_dps.split(",")]
    a.qus = [float(x) for x in a.qus.split(",")]
    a.qws = [float(x) for x in a.qws.split(",")]
    a.locality_qws = [float(x) for x in a.locality_qws.split(",")]
    a.locality_dps = [int(x) for x in a.locality_dps.split(",")]
    a.locality_workloads = a.locality_workloads.split(",")
    a.locality_scenarios = a.locality_scenarios.split(",")
    a.locality_loads = a.locality_loads.split(",")
    if unknown := set(a.fig_loads + a.locality_loads) - set(LOADS):
        p.error(f"unknown load(s) {sorted(unknown)}; choose from {list(LOADS)}")
    a.clients = [int(x) for x in a.clients.split(",")]
    if a.capacity_only:
        run(a)
        return 0
    results = json.loads(Path(a.results).read_text()) if a.redraw else run(a)
    from sglang_fair.experiments.paper_plots import render  # needs matplotlib (the sim extra)

    render(results, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
