"""Reproduce the evaluation of [1] (DLPM / D²LPM, §6-7) in the simulator, under a stated protocol.

    nice -n 10 sglang-fair lab paper > /tmp/rp.log 2>&1      # everything (~1 CPU-hour)
    sglang-fair lab paper --only fig1,fig12 --seeds 0,1,2      # a subset
    sglang-fair lab paper --redraw                             # plots/tables from results.json

Protocol (docs/evidence/results.md, "Protocol"; sglang_fair/experiments/protocol.py): arrivals sustained for
--duration (600 s), metrics over [--warmup, --duration], latency over the programs arriving in
[--warmup, --duration - --cooldown]; every point at a named load (below 0.7x, near 1.0x, above 1.2x)
of the capacity measured with RR+LPM for its workload x scenario x D x preset (experiments/capacity.py);
one run per seed (--seeds, at least 3), --jobs processes at a time. The figures and their flags are
the registry of :mod:`sglang_fair.experiments.figures`. Every run is appended to
results/results.json as it finishes; a rerun skips the runs already there (delete the file to start
over). Nothing is tuned to the paper; the presets are public-figure ones, not GPU-calibrated.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sglang_fair.experiments.figures import SERIES_FIGS, add_options, experiments, parse_options, start_rate
from sglang_fair.experiments.protocol import Point, Protocol, measure_capacity, run_point
from sglang_fair.experiments.runner import REPO, Task, load_json, log, run_tasks, save_json


def open_results(path: Path, proto: Protocol, figs: dict[str, list[Point]]) -> dict[str, Any]:
    """The results file of ``proto`` (a new one if there is none), each figure's point keys added."""
    results: dict[str, Any] = load_json(path, {})
    if results.get("protocol") != asdict(proto):
        if results.get("runs") or results.get("capacity"):
            raise SystemExit(f"{path} holds runs of another protocol ({results.get('protocol')}): "
                             "move it away or pass that protocol's flags")
        results = {"protocol": asdict(proto), "capacity": {}, "runs": [], "figures": {}}
    for name, points in figs.items():  # a figure's points accumulate over invocations
        known = results["figures"].setdefault(name, [])
        known.extend(k for k in dict.fromkeys(p.key() for p in points) if k not in known)
    return results


def capacity_tasks(figs: dict[str, list[Point]], proto: Protocol, results: dict[str, Any]) -> list[Task]:
    """One capacity search per combo not measured yet (QA's, the costliest, last)."""
    combos = {p.combo(): p for points in figs.values() for p in points}
    combos = dict(sorted(combos.items(), key=lambda kv: kv[1].workload == "qa"))
    return [Task(c, measure_capacity, (p, proto, start_rate(p)))
            for c, p in combos.items() if c not in results["capacity"]]


def run_tasks_of(figs: dict[str, list[Point]], proto: Protocol, results: dict[str, Any],
                 seeds: list[int]) -> list[Task]:
    """One run per point and seed not in the results yet (QA's last)."""
    done = {(r["key"], r["seed"]) for r in results["runs"]}
    series = {p.key() for n in SERIES_FIGS if n in figs for p in figs[n]}
    tasks = []
    for p in sorted((p for points in figs.values() for p in points), key=lambda p: p.workload == "qa"):
        for seed in seeds:
            if (p.key(), seed) not in done:
                done.add((p.key(), seed))
                cap = results["capacity"][p.combo()]["capacity"]
                tasks.append(Task(p.key(), run_point, (p, cap, proto, seed, p.key() in series)))
    return tasks


def run(a: argparse.Namespace) -> dict[str, Any]:
    """Measure the missing capacities, then run the missing points; every result is saved as it ends."""
    proto = Protocol(duration=a.duration, warmup=a.warmup, cooldown=a.cooldown,
                     capacity_duration=a.duration, capacity_warmup=a.duration / 4)
    path = Path(a.results)
    figs = experiments(a)
    results = open_results(path, proto, figs)

    def capacity_done(task: Task, cap: dict[str, Any]) -> None:
        results["capacity"][task.key] = cap
        save_json(path, results)
        log(f"capacity {task.key}: {cap['capacity']:.4g} (trials {cap['trials']}, {cap['cpu_s']} CPU s)")

    run_tasks(capacity_tasks(figs, proto, results), a.jobs, capacity_done)
    if a.capacity_only:
        return results
    tasks = run_tasks_of(figs, proto, results, a.seeds)
    log(f"{len(tasks)} runs to do")
    finished = iter(range(1, len(tasks) + 1))

    def run_done(_: Task, row: dict[str, Any]) -> None:
        results["runs"].append(row)
        save_json(path, results)
        log(f"[{next(finished)}/{len(tasks)}] {row['workload']} {row['scenario']} D={row['dp']} "
            f"{row['scheduler']} q_u={row['q_u']:g} q_w={row['q_w']:g} {row['load']} seed {row['seed']}: "
            f"thr {row['throughput']:.0f} jain {row['jain_index']:.3f} "
            f"p99 {row['well_behaved_p99_s']} ({row['cpu_s']} CPU s)")

    run_tasks(tasks, a.jobs, run_done)
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(p)
    p.add_argument("--duration", type=float, default=600.0, help="seconds of sustained arrivals per run")
    p.add_argument("--warmup", type=float, default=120.0, help="seconds left out at the start")
    p.add_argument("--cooldown", type=float, default=120.0,
                   help="latency over arrivals up to --duration minus this (they finish under load)")
    p.add_argument("--jobs", type=int, default=2, help="processes at a time (each at nice >= 10)")
    p.add_argument("--out", default=str(REPO / "docs"),
                   help="the docs folder: the images go to img/, the tables to evidence/results_tables.md")
    p.add_argument("--results", default=str(REPO / "results" / "results.json"),
                   help="every run, kept as it finishes")
    p.add_argument("--capacity-only", action="store_true", help="measure the capacities, run nothing else")
    p.add_argument("--redraw", action="store_true", help="only redraw plots and tables from results.json")
    a = p.parse_args(argv)
    parse_options(p, a)
    if a.capacity_only:
        run(a)
        return 0
    results = json.loads(Path(a.results).read_text()) if a.redraw else run(a)
    from sglang_fair.experiments.paper_plots import render  # needs matplotlib (the sim extra)

    render(results, Path(a.out), Path(a.out) / "evidence" / "results_tables.md")
    return 0
