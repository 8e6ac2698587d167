"""The figures of the paper's evaluation as a registry: each name maps to the function that builds
its points from the options (:data:`FIGURES`), and each option is one entry of :data:`OPTIONS`
(a ``--flag`` of ``sglang-fair lab paper``, a comma-separated list)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sglang_fair.experiments import fleet, replicas
from sglang_fair.experiments.protocol import LOADS, Point
from sglang_fair.experiments.runner import floats, ints, names
from sglang_fair.experiments.scenarios import CLOSED_LOOP
from sglang_fair.workloads import DEFAULT_RATE_PER_WORKER

A10 = "a10-llama3b"
A10_8B = "a10-llama8b"  # Fig. 1's A10 with the 8B model: a 15,716-token pool, so requests wait for memory
# Preble: E2 routing + its priority wait queue; the last: the default pair of serve, sim and bench, and
# cache-aware routing with the same workers before it
PAIRS = [("round_robin", "lpm"), ("preble", "preble"), ("cache_aware", "lpm"), ("client_rr", "vtc"),
         ("d2lpm", "dlpm"), ("d2lpm_guarded", "dlpm"), ("cache_aware", "dlpm_light"),
         ("fair_cache_aware", "dlpm_light")]
PER_WORKER = ("preble", "cache_aware", "d2lpm_guarded", "fair_cache_aware")  # equal RR (or D²LPM) at D = 1
SERIES_FIGS = ("fig8", "fig9", "fig12")  # their runs keep per-client series
ALL_LOADS = ("below", "near", "above")

OPTIONS: tuple[tuple[str, str, Callable[[str], list[Any]], str], ...] = (  # flag, default, parse, help
    ("seeds", "0,1,2", ints, "one run per seed"),
    ("dps", "1,2,4", ints, "fig7's data-parallel degrees (the paper: 1,2,4,8)"),
    ("workloads", "tot,judge,qa", names, "fig7's workloads"),
    ("qa_dps", "1,2", ints, "fig7's D for QA (the costliest workload to simulate)"),
    ("qus", "1024,4096,16384,65536", floats, "fig1's DLPM quanta"),
    ("qws", "2048,16384,131072", floats, "fig10's D²LPM quanta"),
    ("fig10_dps", "4", ints, "fig10's data-parallel degrees (the paper: 8)"),
    ("locality_qws", "131072,1048576,8388608", floats,
     "qw_locality's D²LPM quanta besides the default (why Preble and cache-aware lead)"),
    ("locality_workloads", "qa,judge", names, "qw_locality's workloads"),
    ("locality_scenarios", "s1", names, "qw_locality's scenarios"),
    ("locality_dps", "8", ints, "qw_locality's data-parallel degrees"),
    ("locality_loads", "near", names, "qw_locality's named loads"),
    ("clients", "5,10,20,50", ints, "fig11's client counts"),
    ("fig_loads", "above", names,
     "named loads of fig1, fig1mem, fig8, fig9, fig10, fig11 (below,near,above)"),
    ("load_workloads", "tot,judge", names, "the named-load sweep's workloads"),
    ("load_scenarios", "s1", names, "the named-load sweep's scenarios"),
    ("load_dps", "4", ints, "the named-load sweep's data-parallel degrees"),
    ("fleet_workloads", "judge,qa", names, "fleet's workloads (the gateway against per-server routers)"),
    ("fleet_scenarios", "s1", names, "fleet's scenarios"),
    ("fleet_dps", "8,16", ints, "fleet's worker counts"),
    ("fleet_server_dps", "2,8", ints, "fleet's server sizes (GPUs per server) of the per-server baseline"),
    ("fleet_loads", "above", names, "fleet's named loads"),
    ("replicas_workloads", "judge,weighted", names, "replicas' workloads (router replicas sharing or not)"),
    ("replicas_scenarios", "s1", names, "replicas' scenarios (of the paper workloads)"),
    ("replicas_dps", "8,16", ints, "replicas' worker counts"),
    ("replicas_counts", "2,4", ints, "replicas' numbers of router replicas (besides one router)"),
    ("replicas_lag", "32", ints, "replicas' lag of the sharing replicas besides 0 (notices; one value)"),
    ("replicas_loads", "above", names, "replicas' named loads (of the paper workloads)"),
)

Figure = Callable[[argparse.Namespace], list[Point]]


def pairs(dp: int, guarded: bool = True) -> list[tuple[str, str]]:
    """[1] omits Preble at D = 1; cache-aware routing and the guarded router have one choice there."""
    return [p for p in PAIRS if dp > 1 or p[0] not in PER_WORKER
            if guarded or p[0] != "d2lpm_guarded"]


def _fig1(preset: str) -> Figure:
    def points(a: argparse.Namespace) -> list[Point]:
        runs = [("lpm", 0.0), ("vtc", 0.0)] + [("dlpm", q) for q in a.qus]
        return [Point("tot", "s1", 1, preset, policy=p, q_u=q, load=ld)
                for ld in a.fig_loads for p, q in runs]
    return points


def _d2lpm_quanta(router: str, qws: list[float]) -> list[float]:
    return qws if router.startswith("d2lpm") else [0.0]


FIGURES: dict[str, Figure] = {  # every figure's points, in the order they run (cheap and central first)
    "fig1": _fig1(A10),
    "fig1mem": _fig1(A10_8B),
    "fig12": lambda a: [Point("mix", dp=1, preset=A10, policy=p, load=ld)
                        for ld in ALL_LOADS for p in ("lpm", "vtc", "dlpm")],
    "fig8": lambda a: [Point("arena", dp=2, preset=A10, router=r, policy=p, load=ld)
                       for ld in a.fig_loads for r, p in pairs(2)],
    "fig7": lambda a: [Point(wl, sc, dp, router=r, policy=p)
                       for wl in a.workloads for sc in ("s1", "s2")
                       for dp in (a.qa_dps if wl == "qa" else a.dps) for r, p in pairs(dp)],
    "fig10": lambda a: [Point("tot", sc, dp, router=r, policy=p, q_w=qw, load=ld)
                        for ld in a.fig_loads for dp in a.fig10_dps for sc in ("s1", "none")
                        for r, p in pairs(dp) for qw in _d2lpm_quanta(r, a.qws)],
    "fig9": lambda a: [Point("tot", "s2", 4, A10, router=r, policy=p, branches=3, load=ld)
                       for ld in a.fig_loads for r, p in pairs(4)],
    "fig11": lambda a: [Point("tot", dp=1, preset=A10, policy=p, clients=n, load=ld)
                        for ld in a.fig_loads for n in a.clients for p in ("lpm", "vtc", "dlpm")],
    "loads": lambda a: [Point(wl, sc, dp, router=r, policy=p, load=ld)
                        for dp in a.load_dps for wl in a.load_workloads for sc in a.load_scenarios
                        for ld in ALL_LOADS for r, p in pairs(dp)],
    "qw_locality": lambda a: [Point(wl, sc, dp, router=r, policy=p, q_w=qw, load=ld)  # q_w 0: the default
                              for wl in a.locality_workloads for sc in a.locality_scenarios
                              for dp in a.locality_dps for ld in a.locality_loads for r, p in pairs(dp)
                              for qw in _d2lpm_quanta(r, [0.0, *a.locality_qws])],
    "fleet": lambda a: fleet.points(a.fleet_workloads, a.fleet_scenarios, a.fleet_dps, a.fleet_server_dps,
                                    a.fleet_loads),
    "replicas": lambda a: replicas.points(a.replicas_workloads, a.replicas_scenarios, a.replicas_dps,
                                          a.replicas_counts, a.replicas_lag[0], a.replicas_loads),
}


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--only`` and one flag per entry of :data:`OPTIONS`."""
    parser.add_argument("--only", default=",".join(FIGURES), help="figures to run, of: " + ",".join(FIGURES))
    for name, default, _, help_text in OPTIONS:
        parser.add_argument("--" + name.replace("_", "-"), default=default, help=help_text)


def parse_options(parser: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Turn the list flags into lists, in place; unknown figures and loads are errors."""
    a.only = names(a.only)
    for name, _, parse, _ in OPTIONS:
        setattr(a, name, parse(getattr(a, name)))
    if unknown := set(a.only) - set(FIGURES):
        parser.error(f"unknown figure(s) {sorted(unknown)}; choose from {list(FIGURES)}")
    if unknown := set(a.fig_loads + a.locality_loads + a.fleet_loads + a.replicas_loads) - set(LOADS):
        parser.error(f"unknown load(s) {sorted(unknown)}; choose from {list(LOADS)}")


def experiments(a: argparse.Namespace) -> dict[str, list[Point]]:
    """The points of the figures ``a.only`` names, in that order."""
    return {name: FIGURES[name](a) for name in a.only}


def start_rate(point: Point) -> float:
    """Where the capacity search of ``point.combo()`` starts (total programs/s; arena: time scale)."""
    if point.workload in CLOSED_LOOP:
        return 1.0  # not searched: a closed-loop workload has no rate
    if point.workload == "arena":
        return 5.0  # time scale: 12.5 conversations/s
    per_worker = DEFAULT_RATE_PER_WORKER[point.workload] * (0.1 if point.preset in (A10, A10_8B) else 0.2)
    return per_worker * point.dp / (2.0 if point.scenario == "s1" else 1.0)
