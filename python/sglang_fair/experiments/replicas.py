"""Router replicas (active-active gateways behind a round-robin load balancer) that share what they
know, or not, against one router (the ``replicas`` figure of ``sglang-fair lab paper``).

At D workers, every configuration routes with ``fair_cache_aware``: one router over all D workers;
R replicas of it (``routing/replicas.py``) that tell each other of every dispatch and finish, at once
(lag 0) or ``lag`` notices late; R replicas that do not. Workloads: a paper workload at its named load
(``dlpm_light`` workers, as ``serve`` runs and the fleet figure uses), and ``weighted``
(``experiments/scenarios.py``): heavy clients c0 (weight 4) and c1 (weight 1) backlogged, a light
client c2; there the workers run ``dlpm``, whose weights a single router keeps near 4:1, and one row
runs ``dlpm_light`` with a single router (it does not keep them there either). :func:`table` gives the
hit rate, the service ratio c0 / c1 (weighted only), Jain's index, the light clients' P99 and the
throughput against the single router's at the same D.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sglang_fair.experiments.fleet import mean, mean_range
from sglang_fair.experiments.protocol import Point
from sglang_fair.experiments.scenarios import CLOSED_LOOP

ROUTER = "fair_cache_aware"
Row = dict[str, Any]
Config = tuple[int, bool, int, str]  # replicas, sharing, lag, workers


def workers(workload: str) -> str:
    return "dlpm" if workload in CLOSED_LOOP else "dlpm_light"


def configs(workload: str, counts: Iterable[int], lag: int) -> list[Config]:
    """One router, R replicas sharing at lag 0 and ``lag``, R not sharing (and, weighted, one router
    over dlpm_light workers)."""
    policy = workers(workload)
    out = [(1, True, 0, policy)] + [(1, True, 0, "dlpm_light")] * (workload in CLOSED_LOOP)
    out += [(r, True, g, policy) for r in counts for g in dict.fromkeys((0, lag))]
    return out + [(r, False, 0, policy) for r in counts]


def points(workloads: list[str], scenarios: list[str], dps: list[int], counts: list[int], lag: int,
           loads: list[str]) -> list[Point]:
    """A closed-loop workload has no scenario or load of its own: it runs once, at ``loads[0]``."""
    out = []
    for wl in workloads:
        closed = wl in CLOSED_LOOP
        for sc in ["none"] if closed else scenarios:
            for ld in loads[:1] if closed else loads:
                out += [Point(wl, sc, dp, router=ROUTER, policy=p, replicas=r, replica_share=s,
                              replica_lag=g, load=ld)
                        for dp in dps for r, s, g, p in configs(wl, counts, lag)]
    return out


def label(row: Row) -> str:
    name = "one router" if row["replicas"] == 1 else f"{row['replicas']} replicas, " + (
        f"sharing, lag {row['replica_lag']}" if row["replica_share"] else "not sharing")
    return name if row["policy"] == workers(row["workload"]) else f"{name}, {row['policy']} workers"


def _pair_ratio(row: Row) -> float | None:
    detail = row["clients_detail"]
    if row["workload"] not in CLOSED_LOOP or not detail["c1"]["service"]:
        return None
    return float(detail["c0"]["service"] / detail["c1"]["service"])


def summarize(runs: list[Row]) -> list[Row]:
    """One entry per (cell, D, configuration), seeds pooled, in the order first met."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in runs:
        cell = f"{r['workload']} {r['scenario'].upper()} {r['load']}" if r["workload"] not in CLOSED_LOOP \
            else r["workload"]
        groups.setdefault((cell, r["dp"], label(r)), []).append(r)
    out = []
    for (cell, dp, name), rs in groups.items():
        one = groups.get((cell, dp, "one router"), [])
        ratios = [x for r in rs if (x := _pair_ratio(r)) is not None]
        out.append({"cell": cell, "dp": dp, "name": name, "seeds": len(rs),
                    "hit": [r["cache_hit_rate"] for r in rs], "ratio": ratios,
                    "jain": [r["jain_index"] for r in rs],
                    "p99": [r["well_behaved_p99_s"] for r in rs if r["well_behaved_p99_s"] is not None],
                    "throughput": [r["throughput"] for r in rs],
                    "vs_one": mean([r["throughput"] for r in rs]) / mean([r["throughput"] for r in one])
                    if one else None})
    return out


def table(runs: list[Row]) -> str:
    """The replicas table: mean [min-max] over seeds."""
    head = ["cell", "D", "routing", "hit rate", "c0 / c1 service (weights 4:1)", "Jain", "light P99 s",
            "K tok/s", "/ one router's"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for e in summarize(runs):
        cols = [e["cell"], str(e["dp"]), e["name"], mean_range(e["hit"], ".3f"),
                mean_range(e["ratio"], ".2f"), mean_range(e["jain"], ".3f"), mean_range(e["p99"], ".2f"),
                mean_range([x / 1000 for x in e["throughput"]], ".1f"),
                "-" if e["vs_one"] is None else f"{e['vs_one']:.3f}"]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines)


PANELS = (("hit", "hit rate"), ("ratio", "c0 / c1 service (4:1 wanted)"), ("jain", "Jain's index"),
          ("p99", "light P99 (s)"), ("throughput", "K tok/s"))


def plot(runs: list[Row], path: Path) -> None:
    """A row per cell, a panel per metric, a bar per configuration (mean, min-max whiskers), a group
    per D."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    entries = summarize(runs)
    cells = list(dict.fromkeys(e["cell"] for e in entries))
    names = list(dict.fromkeys(e["name"] for e in entries))
    colors = {n: f"C{i}" for i, n in enumerate(names)}
    fig, axes = plt.subplots(len(cells), len(PANELS), figsize=(17, 3.2 * len(cells)), squeeze=False)
    for row, cell in zip(axes, cells, strict=True):
        mine = [e for e in entries if e["cell"] == cell]
        xs = [i + 0.6 * (e["dp"] != mine[0]["dp"]) for i, e in enumerate(mine)]
        for ax, (key, title) in zip(row, PANELS, strict=True):
            for x, e in zip(xs, mine, strict=True):
                vals = [v / (1000 if key == "throughput" else 1) for v in e[key]]
                if vals:
                    m = mean(vals)
                    ax.bar(x, m, color=colors[e["name"]], width=0.8,
                           yerr=[[max(0.0, m - min(vals))], [max(0.0, max(vals) - m)]], capsize=2)
            if not any(e[key] for e in mine):
                ax.text(0.5, 0.5, "no weighted pair", ha="center", transform=ax.transAxes, fontsize=8)
            ax.set_xticks(xs, [f"D={e['dp']}" if i == 0 or e["dp"] != mine[i - 1]["dp"] else ""
                               for i, e in enumerate(mine)], fontsize=7)
            ax.set_title(f"{cell}: {title}", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.legend([Patch(color=colors[n]) for n in names], names, loc="lower center", ncol=4, fontsize=7)
    fig.suptitle("Router replicas behind a round-robin balancer, fair_cache_aware: sharing dispatches and "
                 "finishes (lag in notices) or not, against one router", fontsize=9)
    fig.tight_layout(rect=(0, 0.9 / fig.get_figheight(), 1, 1 - 0.35 / fig.get_figheight()))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
