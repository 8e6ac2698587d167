"""The frontier: every routing and admission pair side by side at every operating point a user may run.

    sglang-fair lab frontier [--quick] [--jobs 2] [--results results/frontier.json]

A cell is a workload at an operating point: the DLPM paper's Fig. 7 cells with D > 1 (ToT, Judge, QA;
S1, S2; D = 2, 4, 8) at 1.0x and 1.2x capacity, the Chatbot Arena trace, the ``flood`` and ``weighted``
closed loops (experiments/scenarios.py) and two hot-prefix workloads (``sysprompt``: one system prompt
shared by every client, c0 at 4x; ``groups``: clients in two groups sharing a prompt per group), at D in
{2, 4, 8}, at most {8, 32, 256} requests running per worker, on the A100 + Llama-3.1-8B preset and the
CPU engine's measured tiny-model preset. Open-loop cells run at a multiple of the capacity RR + LPM
sustains there (:mod:`sglang_fair.experiments.capacity`, measured once per combo and kept in the
results file). Every pair runs every cell (one seed); a run's row holds the protocol's figures and the
per-window ones the default is judged by (:mod:`sglang_fair.experiments.frontier_metrics`).
``--quick`` runs a subset (D 2 and 4, caps 8 and 256, the A100 preset) for design iterations.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sglang_fair.experiments.capacity import CapacitySearch
from sglang_fair.experiments.figures import start_rate
from sglang_fair.experiments.frontier_metrics import frontier_row
from sglang_fair.experiments.frontier_report import by_seed, plot, starves_nobody, summary, table, verdicts
from sglang_fair.experiments.paper_tables import write_generated
from sglang_fair.experiments.protocol import Point, Protocol, measure_capacity
from sglang_fair.experiments.runner import REPO, Task, load_json, log, names, run_tasks, save_json
from sglang_fair.experiments.scenarios import CLOSED_LOOP

ROUTERS = ("round_robin", "shortest_queue", "cache_aware", "d2lpm", "d2lpm_guarded", "preble",
           "fair_cache_aware")
ADMISSIONS = ("fcfs", "lpm", "dlpm", "dlpm_light", "vtc")
PAIRS = (*itertools.product(ROUTERS, ADMISSIONS), ("client_rr", "vtc"), ("preble", "preble"))
DEFAULT = ("fair_cache_aware", "dlpm_light")
PRESETS = ("a100-llama8b", "cpu-tiny-llama")
CAPS = (8, 32, 256)
DPS = (2, 4, 8)
PROTOCOL = Protocol(duration=300.0, warmup=60.0, cooldown=60.0, capacity_duration=300.0, capacity_warmup=75.0)
OPEN = [(wl, sc) for wl in ("tot", "judge", "qa") for sc in ("s1", "s2")] + [
    ("arena", "none"), ("sysprompt", "s1"), ("groups", "s1")]
LOADS = ("near", "above")
RESULTS = REPO / "results" / "frontier.json"


@dataclass(frozen=True)
class Cell:
    """A workload at an operating point; ``load`` is None for the closed loops."""

    workload: str
    scenario: str
    dp: int
    preset: str
    max_running: int
    load: str | None

    def point(self, router: str, policy: str) -> Point:
        return Point(self.workload, self.scenario, self.dp, self.preset, router, policy,
                     load=self.load or "above", max_running=self.max_running)

    def name(self) -> str:
        load = {"near": " 1.0x", "above": " 1.2x", None: ""}[self.load]
        scenario = "" if self.scenario == "none" else f" {self.scenario.upper()}"
        preset = "A100" if self.preset.startswith("a100") else "CPU"
        return f"{self.workload}{scenario}{load} D={self.dp} M={self.max_running} {preset}"


def cells(quick: bool = False) -> list[Cell]:
    """Every cell of the matrix (``quick``: D 2 and 4, caps 8 and 256, the A100 preset)."""
    presets, caps, dps = (PRESETS[:1], (8, 256), (2, 4)) if quick else (PRESETS, CAPS, DPS)
    out = []
    for preset, cap, dp in itertools.product(presets, caps, dps):
        out += [Cell(wl, sc, dp, preset, cap, ld) for wl, sc in OPEN for ld in LOADS]
        out += [Cell(wl, "none", dp, preset, cap, None) for wl in CLOSED_LOOP]
    return out


def run_pair(cell: Cell, pair: tuple[str, str], capacity: float, proto: Protocol,
             seed: int = 0) -> dict[str, Any]:
    """One pair on one cell: the row of the results file."""
    return {"cell": cell.name(), **vars(cell), "router": pair[0], "policy": pair[1], "seed": seed,
            **frontier_row(cell.point(*pair), capacity, proto, seed)}


def contenders(rows: list[dict[str, Any]], top: int = 3) -> set[tuple[str, str]]:
    """The pairs whose figures decide a cell's verdict, by their seed-0 rows: the default, the ``top``
    fastest, and the fastest that starves nobody (:func:`frontier_report.starves_nobody`)."""
    first = [r for r in rows if r.get("seed", 0) == 0]
    mine = next((r for r in first if (r["router"], r["policy"]) == DEFAULT), None)
    ranked = sorted(first, key=lambda r: -r["throughput"])
    picked = {(r["router"], r["policy"]) for r in ranked[:top]} | {DEFAULT}
    fair = [r for r in ranked if mine is not None and starves_nobody(r, mine)]
    return picked | {(r["router"], r["policy"]) for r in fair[:1]}


def capacities(todo: list[Cell], doc: dict[str, Any], jobs: int, proto: Protocol, path: Path) -> None:
    """Measure the capacity of every open-loop combo not yet in ``doc`` (kept as each one ends)."""
    combos = {c.point(*DEFAULT).combo(): c for c in todo if c.load is not None}
    missing = [(k, c) for k, c in combos.items() if k not in doc["capacity"]]
    tasks = []
    for key, cell in missing:
        point = cell.point(*DEFAULT)
        search = CapacitySearch(start=start_rate(point), threshold=proto.capacity_threshold, precision=0.15,
                                max_runs=10)
        tasks.append(Task(key, measure_capacity, (point, proto, search.start, search)))

    def keep(task: Task, found: dict[str, Any]) -> None:
        doc["capacity"][task.key] = found
        save_json(path, doc)
        log(f"capacity {task.key}: {found['capacity']}")

    run_tasks(tasks, jobs, keep)


def run(quick: bool, jobs: int, path: Path = RESULTS, pairs: tuple[tuple[str, str], ...] = PAIRS,
        proto: Protocol = PROTOCOL, only: str = "", seeds: int = 1) -> dict[str, Any]:
    """Every cell and pair not yet in the results file at ``path`` (resumable; rows kept as they end),
    seed 0; then seeds 1 .. ``seeds`` - 1 of each cell's :func:`contenders`."""
    doc: dict[str, Any] = load_json(path, {"protocol": vars(proto), "capacity": {}, "runs": []})
    wanted = names(only)
    todo = [c for c in cells(quick) if not wanted or any(w in c.name() for w in wanted)]
    capacities(todo, doc, jobs, proto, path)
    _run_rows(doc, path, jobs, [(c, p, 0) for c in todo for p in pairs], proto)
    if seeds > 1:
        by_cell: dict[str, list[dict[str, Any]]] = {}
        for r in doc["runs"]:
            by_cell.setdefault(r["cell"], []).append(r)
        more = [(c, p, s) for c in todo for p in sorted(contenders(by_cell.get(c.name(), [])))
                if p in pairs for s in range(1, seeds)]
        _run_rows(doc, path, jobs, more, proto)
    return doc


def _run_rows(doc: dict[str, Any], path: Path, jobs: int, wanted: list[tuple[Cell, tuple[str, str], int]],
              proto: Protocol) -> None:
    """Run the (cell, pair, seed) rows not yet in ``doc``, keeping them as they end."""
    done = {(r["cell"], r["router"], r["policy"], r.get("seed", 0)) for r in doc["runs"]}
    tasks = []
    for cell, p, seed in wanted:
        if (cell.name(), *p, seed) in done:
            continue
        cap = doc["capacity"][cell.point(*DEFAULT).combo()]["capacity"] if cell.load else 1.0
        tasks.append(Task((cell.name(), *p, seed), run_pair, (cell, p, cap, proto, seed)))
    log(f"{len(tasks)} runs to do")

    def keep(task: Task, row: dict[str, Any]) -> None:
        doc["runs"].append(row)
        if len(doc["runs"]) % 20 == 0:
            save_json(path, doc)
        log(f"{row['cell']} {row['router']}:{row['policy']} thr {row['throughput']:.0f} "
            f"jain {row['jain_index']:.3f} floor {row['window_floor']} ({row['cpu_s']} s)")

    run_tasks(tasks, jobs, keep)
    save_json(path, doc)


def variant(base: Protocol, **changes: Any) -> Protocol:
    """``base`` with some fields changed (tests run the matrix on a short protocol)."""
    return replace(base, **changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="D 2 and 4, caps 8 and 256, the A100 preset")
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time")
    parser.add_argument("--seeds", type=int, default=3,
                        help="seeds of each cell's contenders (seed 0: every pair)")
    parser.add_argument("--results", default=str(RESULTS),
                        help="the results file (resumed, kept as it grows)")
    parser.add_argument("--pairs", default="", help="router:policy pairs to run (default: every pair)")
    parser.add_argument("--only", default="", help="run only the cells whose name holds one of these texts "
                        "(comma-separated)")
    parser.add_argument("--report-only", action="store_true", help="report the results file, run nothing")
    parser.add_argument("--extra", default="", help="more results files whose rows join the report")
    parser.add_argument("--today", default="",
                        help="a results file of the earlier default (flood's light P99)")
    parser.add_argument("--doc", default="", help="write the summary and table between this markdown file's "
                        "GENERATED markers")
    parser.add_argument("--plot", default="", help="write the grid figure here")
    parser.add_argument("--by-seed", action="store_true",
                        help="also report each seed on its own (the default against the pairs that ran it)")
    args = parser.parse_args(argv)
    pairs = tuple(tuple(p.split(":")) for p in names(args.pairs)) or PAIRS
    if any(len(p) != 2 for p in pairs):
        parser.error(f"--pairs: router:policy, comma-separated (got {args.pairs!r})")
    path = Path(args.results)
    doc = load_json(path, {"runs": []}) if args.report_only else run(
        args.quick, args.jobs, path, pairs, only=args.only, seeds=args.seeds)  # type: ignore[arg-type]
    rows = list(doc["runs"])
    for extra in names(args.extra):
        rows += load_json(Path(extra), {"runs": []})["runs"]
    today = load_json(Path(args.today), {"runs": []})["runs"] if args.today else []
    vs = verdicts(rows, ":".join(DEFAULT), today)
    print(summary(vs))
    if args.by_seed:
        print(by_seed(rows, ":".join(DEFAULT), today))
    if args.doc:
        body = f"```\n{summary(vs)}\n```\n\n{table(vs)}\n"
        write_generated(Path(args.doc), body, "# The frontier")
    if args.plot:
        plot(vs, Path(args.plot))
    return 0
