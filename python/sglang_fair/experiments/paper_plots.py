"""Figures and tables of ``sglang-fair lab paper`` (needs matplotlib: the ``sim`` extra).

``render(results, out, doc)`` draws docs/img/fig*.png from results/results.json (every run of the
protocol, :mod:`sglang_fair.experiments.protocol`) and rewrites the generated section of ``doc``
(docs/evidence/results_tables.md; ``out/results_tables.md`` by default), between the BEGIN/END
GENERATED markers (the markdown: :mod:`sglang_fair.experiments.paper_tables`). Every point is the
mean over its seeds; error bars and the brackets in the tables are the seeds' min-max.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sglang_fair.experiments import fleet, replicas
from sglang_fair.experiments.paper_tables import (
    METRICS,
    QUEUE_METRICS,
    capacity_table,
    qw,
    table,
    write_generated,
)
from sglang_fair.experiments.protocol import LOADS, UNSET, aggregate

COLORS = {"RR+LPM": "C1", "LPM": "C1", "Preble": "C2", "Cache-aware": "C5", "VTC": "C3", "D²LPM": "C0",
          "DLPM": "C0", "D²LPM-guarded": "C4", "Cache-aware + dlpm_light": "C7",
          "Fair cache-aware": "C6", "RR + dlpm_light": "C8", "Per-server, RR LB": "C9",
          "Per-server, client-hash LB": "C9",
          "Fair cache-aware, no eviction feed": "C6"}  # also the order of the tables' rows
LABELS = {"throughput": "throughput (perceived tok/s)", "jain_index": "Jain's index",
          "well_behaved_p50_s": "well-behaved P50 (s)", "well_behaved_p99_s": "well-behaved P99 (s)",
          "cache_hit_rate": "hit rate"}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bar(ax: Any, xs: list[float], pts: list[dict[str, Any]], key: str, **kw: Any) -> None:
    """Means with min-max error bars."""
    ys = [p[key]["mean"] for p in pts]
    err = [[p[key]["mean"] - p[key]["lo"] for p in pts], [p[key]["hi"] - p[key]["mean"] for p in pts]]
    ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, markersize=4, **kw)


def _ok(p: dict[str, Any], key: str) -> bool:
    return p[key]["mean"] is not None


def fig1(pts: list[dict[str, Any]], ax: Any) -> None:
    for p in pts:
        j, t = p["jain_index"], p["throughput"]
        label = "DLPM" if p["policy"] == "dlpm" else p["scheduler"]
        ax.errorbar(j["mean"], t["mean"], xerr=[[j["mean"] - j["lo"]], [j["hi"] - j["mean"]]],
                    yerr=[[t["mean"] - t["lo"]], [t["hi"] - t["mean"]]], marker="o", capsize=3,
                    color=COLORS.get(label, "C0"))
        ax.annotate(label + (f" Q^u={p['q_u']:g}" if p["q_u"] else ""), (j["mean"], t["mean"]), fontsize=7)
    ax.set_xlabel("Jain's index")
    ax.set_ylabel(LABELS["throughput"])


def _by(pts: list[dict[str, Any]], field: str) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = {}
    for p in pts:
        out.setdefault(p[field], []).append(p)
    return out


def lines(pts: list[dict[str, Any]], axes: list[Any], x: str, keys: tuple[str, ...],
          group: str = "scheduler", xmap: Callable[[Any], float] = float) -> None:
    """One line per ``group`` value, ``x`` on the axis, one metric per axis."""
    for name, sub in _by(pts, group).items():
        sub = sorted(sub, key=lambda p: xmap(p[x]))
        for ax, key in zip(axes, keys, strict=True):
            ok = [p for p in sub if _ok(p, key)]
            _bar(ax, [xmap(p[x]) for p in ok], ok, key, label=name, color=COLORS.get(name))
    for ax, key in zip(axes, keys, strict=True):
        ax.set_ylabel(LABELS[key], fontsize=7)
        ax.tick_params(labelsize=7)


def fig10(pts: list[dict[str, Any]], ax: Any, key: str = "throughput") -> None:
    """``key`` of D²LPM (and guarded) against Q^w; the other schedulers as bands (mean, min-max)."""
    pts = [{**p, "q_w": qw(p)} for p in pts]
    qws = sorted({p["q_w"] for p in pts if p["q_w"]})
    for p in pts:
        if not p["q_w"]:
            t = p[key]
            color = COLORS[p["scheduler"]]
            ax.axhline(t["mean"], linestyle="--", linewidth=1, color=color, label=p["scheduler"])
            ax.axhspan(t["lo"], t["hi"], color=color, alpha=0.12)
    for name in ("D²LPM", "D²LPM-guarded"):
        sub = sorted((p for p in pts if p["scheduler"] == name), key=lambda p: p["q_w"])
        _bar(ax, [p["q_w"] for p in sub], sub, key, label=name, color=COLORS[name])
    ax.set_xscale("log")
    ax.set_xticks(qws)
    ax.set_xticklabels([f"{q:,.0f}" for q in qws], fontsize=7)
    ax.set_xlabel("Q^w")
    ax.set_ylabel(LABELS[key], fontsize=7)


def series(runs: list[dict[str, Any]], path: Path, title: str) -> None:
    """Per scheduler (columns): per-client mean latency by arrival time, and perceived service."""
    plt = _plt()
    fig, axes = plt.subplots(3, len(runs), figsize=(3.2 * len(runs), 7), squeeze=False, sharex=True)
    for j, r in enumerate(runs):
        for c, s in sorted(r["series"].items()):
            xs = [20.0 * (i + 0.5) for i in range(len(s["perceived"]))]
            lat = [(x, y) for x, y in zip(xs, s["latency"], strict=True) if y is not None]
            axes[0][j].plot([p[0] for p in lat], [p[1] for p in lat], label=c, linewidth=1)
            axes[1][j].plot(xs, s["actual"], label=c, linewidth=1)
            axes[2][j].plot(xs, s["perceived"], label=c, linewidth=1)
        axes[0][j].set_title(f"{r['scheduler']} (seed {r['seed']})", fontsize=8)
        axes[2][j].set_xlabel("time (s)", fontsize=7)
        for ax in axes[:, j]:
            ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("latency by arrival (s)", fontsize=7)
    axes[1][0].set_ylabel("actual service (/s)", fontsize=7)
    axes[2][0].set_ylabel("perceived service (/s)", fontsize=7)
    axes[0][0].legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


COLS = {"fig1": ["load", "scheduler", "q_u", "rate"], "fig1mem": ["load", "scheduler", "q_u", "rate"],
        "fig7": ["workload", "scenario", "dp", "scheduler", "rate"],
        "fig8": ["load", "scheduler", "rate"], "fig9": ["load", "scheduler", "rate"],
        "fig10": ["load", "dp", "scenario", "scheduler", "q_w"],
        "fig11": ["load", "clients", "scheduler", "rate"], "fig12": ["load", "scheduler", "rate"],
        "loads": ["workload", "scenario", "dp", "load", "scheduler", "rate"],
        "qw_locality": ["workload", "scenario", "dp", "load", "scheduler", "q_w", "rate"],
        "fleet": ["workload", "scenario", "load", "dp", "server_dp", "balancer", "scheduler", "rate"],
        "replicas": ["workload", "scenario", "load", "dp", "policy", "replicas", "replica_share",
                     "replica_lag"]}
TITLES = {"fig1": "Fig. 1: one A10 + 3B, ToT S1",
          "fig1mem": "Fig. 1 under memory pressure: one A10 + 8B (15,716-token pool), ToT S1",
          "fig7": "Fig. 7: A100 + 8B, above capacity",
          "fig8": "Fig. 8: Chatbot Arena multi-turn, D=2, A10 + 3B",
          "fig9": "Fig. 9: ToT S2 (c0: 10x longer question), 3 branches, D=4, A10 + 3B",
          "fig10": "Fig. 10: Q^w, ToT (a: S1, b: no misbehaving client; a row per load and D)",
          "fig11": "Fig. 11: 5-50 clients on one A10, ToT (loads of the 4-client capacity, in total)",
          "fig12": "Fig. 12: mix on one A10 (c0, c1 multi-turn; c2 ToT; c3 judge)",
          "loads": "Named loads: 0.7x / 1.0x / 1.2x capacity (a row per workload, scenario and D)",
          "qw_locality": "Q^w at paper scale: D²LPM and D²LPM-guarded against the other routers",
          "fleet": "Several servers: the gateway against a load balancer over per-server routers, A100 + 8B",
          "replicas": "Router replicas: active-active routers that share what they know, or not, A100 + 8B"}


OWN_TABLES = {"fleet": fleet.table, "replicas": replicas.table}  # figures whose table reads the runs


def draw(name: str, pts: list[dict[str, Any]], runs: list[dict[str, Any]], path: Path) -> None:
    if name in ("fleet", "replicas"):
        (fleet.plot if name == "fleet" else replicas.plot)(runs, path)
        return
    plt = _plt()
    if name in ("fig8", "fig9", "fig12"):
        pick = [r for r in runs if r["seed"] == 0 and r.get("series") and r["load"] == "above"]
        series(pick, path, TITLES[name] + " (seed 0)")
        return
    if name == "fig7" or name == "loads":
        pts = [{**p, "scheduler": "RR+LPM" if p["scheduler"] == "LPM" else p["scheduler"]} for p in pts]
        def group(p: dict[str, Any]) -> tuple[Any, ...]:  # fig7's x axis is D; the load sweep's a row per D
            return (p["workload"], p["scenario"]) + (() if name == "fig7" else (p["dp"],))

        groups = sorted({group(p) for p in pts})
        keys = ("throughput", "jain_index", "well_behaved_p99_s", "cache_hit_rate")
        fig, axes = plt.subplots(len(groups), 4, figsize=(13, 2.5 * len(groups)), squeeze=False)
        for i, g in enumerate(groups):
            sub = [p for p in pts if group(p) == g]
            x = "dp" if name == "fig7" else "load"
            lines(sub, list(axes[i]), x, keys, xmap=(float if name == "fig7" else LOADS.__getitem__))
            axes[i][0].set_title(f"{g[1].upper()}@{g[0]}" + (f" D={g[2]}" if len(g) > 2 else ""), fontsize=8)
            for ax in axes[i]:
                ax.set_xticks(sorted({float(p["dp"]) if name == "fig7" else LOADS[p["load"]] for p in sub}))
        axes[0][0].legend(fontsize=6)
    elif name == "fig10":
        rows = sorted({(LOADS[p["load"]], p["dp"]) for p in pts})
        fig, axes = plt.subplots(len(rows), 2, figsize=(10, 3.8 * len(rows)), squeeze=False)
        for row, (share, dp) in zip(axes, rows, strict=True):
            for ax, sc in zip(row, ("s1", "none"), strict=True):
                fig10([p for p in pts if (p["scenario"], p["dp"], LOADS[p["load"]]) == (sc, dp, share)], ax)
                ax.set_title(f"({'a' if sc == 's1' else 'b'}) scenario {sc}, D={dp}, {share:g}x capacity",
                             fontsize=8)
            row[0].legend(fontsize=6)
    elif name == "qw_locality":
        def cell(p: dict[str, Any]) -> tuple[Any, ...]:
            return p["workload"], p["scenario"], p["dp"], LOADS[p["load"]]

        cells = sorted({cell(p) for p in pts})
        metrics = ("throughput", "cache_hit_rate", "well_behaved_p99_s", "jain_index")
        fig, axes = plt.subplots(len(cells), len(metrics), figsize=(15, 2.8 * len(cells)), squeeze=False)
        for row, c in zip(axes, cells, strict=True):
            for ax, key in zip(row, metrics, strict=True):
                fig10([p for p in pts if cell(p) == c], ax, key)
            row[0].set_title(f"{c[0]} {c[1].upper()}, D={c[2]}, {c[3]:g}x capacity", fontsize=8)
        axes[0][0].legend(fontsize=6)
    else:  # fig1, fig1mem, fig11: a panel per load
        loads = sorted({p["load"] for p in pts}, key=LOADS.__getitem__)
        fig, axes = plt.subplots(1, len(loads), figsize=(5.5 * len(loads), 3.8), squeeze=False)
        for ax, load in zip(axes[0], loads, strict=True):
            sub = [p for p in pts if p["load"] == load]
            if name in ("fig1", "fig1mem"):
                fig1(sub, ax)
            else:
                lines(sub, [ax], "clients", ("throughput",))
                ax.set_xlabel("clients")
            ax.set_title(f"{LOADS[load]:g}x capacity", fontsize=8)
        if name == "fig11":
            axes[0][0].legend(fontsize=7)
    fig.suptitle(TITLES[name], fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _row_order(cols: list[str], runs: list[dict[str, Any]]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """Rows grouped by the table's columns in order: loads and schedulers in their own order,
    numbers by value, other text as first met (tot, judge, qa as the figure defines them)."""
    seen: dict[Any, int] = {}
    for r in runs:
        for c in cols:
            seen.setdefault((c, r[c]), len(seen))
    ranks = {"load": LOADS.__getitem__, "scheduler": list(COLORS).index}

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(ranks[c](r[c]) if c in ranks else r[c] if isinstance(r[c], int | float)
                     else seen[(c, r[c])] for c in cols if c != "rate") + (r["seed"],)

    return key


def _split(name: str, pts: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The images of a figure: (file stem, its points)."""
    if name not in ("loads", "qw_locality"):
        return [(name, pts)]
    return [(f"{name}_d{dp}", [p for p in pts if p["dp"] == dp]) for dp in sorted({p["dp"] for p in pts})]


def render(results: dict[str, Any], out: Path, doc: Path | None = None) -> None:
    """Write the PNGs (``out/img``) and the generated tables of ``doc`` (docs/evidence/results_tables.md)
    from results/results.json; the tables link the PNGs relative to ``doc``."""
    img = out / "img"
    doc = doc or out / "results_tables.md"
    img.mkdir(parents=True, exist_ok=True)
    parts = []
    if results.get("capacity"):
        parts.append("### Measured capacities\n\n" + capacity_table(results["capacity"]) + "\n")
    for name in TITLES:
        keys = results.get("figures", {}).get(name)
        runs = [{**UNSET, **r} for r in results.get("runs", []) if keys and r["key"] in set(keys)]
        if not runs:
            continue
        runs.sort(key=_row_order(COLS[name], runs))
        pts = aggregate(runs)
        images = []
        for part, sub in _split(name, pts):  # the sweeps over cells: an image per D
            draw(name, sub, runs, img / f"{part}.png")
            images.append(f"![{part}]({Path(os.path.relpath(img / part, doc.parent)).as_posix()}.png)")
        missing = len(keys) - len(pts)
        parts.append(f"### {TITLES[name]}\n\n" + "\n".join(images) + "\n\n"
                     + (f"({missing} of {len(keys)} points not run.)\n\n" if missing else "")
                     + (OWN_TABLES[name](runs) if name in OWN_TABLES else
                        table(pts, COLS[name], METRICS + (QUEUE_METRICS if name == "fig1mem" else [])))
                     + "\n")
    write_generated(doc, "\n".join(parts), "# Results: every figure's table")
