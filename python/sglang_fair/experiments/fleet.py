"""The gateway's evidence: one router over the workers of several servers against a load balancer over
servers that each route over their own workers (the ``fleet`` figure of ``sglang-fair lab paper``).

At D workers, every worker running ``dlpm_light`` (what ``sglang-fair serve`` runs):

- the gateway: one policy over all D workers and one global tree, ``fair_cache_aware`` (its default),
  ``cache_aware`` or ``round_robin``. In the simulator this is also one node's router over D GPUs: the
  simulator does not model where the workers are (see docs/evidence/results.md, "Several servers"). Its router
  hears of evictions, as the gateway does from servers started with ``--feedback-port``: the default
  is run a second time without (``eviction_feed`` off: servers without a feedback port);
- without the gateway: ``per_server``, servers of ``server_dp`` workers, each with its own
  ``fair_cache_aware`` router, behind a plain load balancer (round robin, or a hash of the client,
  the latter only where there are no more servers than clients: with more, some servers get no client).

The rows are the protocol's (:func:`sglang_fair.experiments.protocol.run_point`: each D at a named
load of its own measured capacity); :func:`table` adds throughput per GPU and against the gateway's
default at the same D, and the clients' service: the well-behaved clients' against the gateway's
default at the same D, and the misbehaving client c0's against a well-behaved one's.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sglang_fair.experiments.protocol import BALANCERS, Point

GLOBAL = ("fair_cache_aware", "cache_aware", "round_robin")  # the gateway's policy over every worker
WORKERS = "dlpm_light"
Row = dict[str, Any]


def routers(dp: int, server_dps: Iterable[int], clients: int = 4) -> list[tuple[str, int, str, bool]]:
    """(router, server_dp, balancer, eviction feed) of each configuration at ``dp`` workers."""
    out = [(r, 0, "", True) for r in GLOBAL] + [(GLOBAL[0], 0, "", False)]
    for size in server_dps:
        if size < dp and dp % size == 0:
            out.append(("per_server", size, "round_robin", True))
            if dp // size <= clients:
                out.append(("per_server", size, "client_hash", True))
    return out


def points(workloads: list[str], scenarios: list[str], dps: list[int], server_dps: list[int],
           loads: list[str]) -> list[Point]:
    return [Point(wl, sc, dp, router=r, policy=WORKERS, server_dp=s, balancer=b, eviction_feed=f, load=ld)
            for wl in workloads for sc in scenarios for ld in loads for dp in dps
            for r, s, b, f in routers(dp, server_dps)]


def label(row: Row, count: bool = True) -> str:
    """The configuration's name in the table (``count``: servers x GPUs) and the plot (GPUs a server)."""
    if row["router"] != "per_server":
        if not row.get("eviction_feed", True):
            return f"gateway: {row['router']}, no eviction feed"
        default = " (default)" if row["router"] == GLOBAL[0] else ""
        return f"gateway: {row['router']}{default}"
    size = row["server_dp"]
    servers = f"{row['dp'] // size} x {size}" if count else f"servers of {size}"
    return f"{servers}: {BALANCERS[row['balancer']]} + fair_cache_aware"


def rank(row: Row) -> tuple[int, int, int]:
    """The configurations' order: the gateway's policies, then servers from small to large, RR first."""
    if row["router"] != "per_server":
        return 0, GLOBAL.index(row["router"]) + (0 if row.get("eviction_feed", True) else len(GLOBAL)), 0
    return 1, row["server_dp"], list(BALANCERS).index(row["balancer"])


DEFAULT = label({"router": GLOBAL[0]})


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _service(row: Row, well_behaved: bool) -> float:
    clients = row["clients_detail"].items()
    return float(sum(c["service"] for name, c in clients if (name != "c0") == well_behaved))


def _c0_vs_wb(row: Row) -> float:
    """c0's service over the mean well-behaved client's."""
    return _service(row, False) / (_service(row, True) / (len(row["clients_detail"]) - 1))


def summarize(runs: list[Row]) -> list[Row]:
    """One entry per (workload, scenario, load, D, configuration), seeds pooled: cells as first met,
    then D, then the configurations in :func:`rank` order."""
    cells = list(dict.fromkeys((r["workload"], r["scenario"], r["load"]) for r in runs))
    runs = sorted(runs, key=lambda r: (cells.index((r["workload"], r["scenario"], r["load"])), r["dp"],
                                       rank(r)))
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in runs:
        cell = (r["workload"], r["scenario"], r["load"])
        groups.setdefault((*cell, r["dp"], label(r)), []).append(r)
    out = []
    for (wl, sc, ld, dp, name), rs in groups.items():
        same_d = groups.get((wl, sc, ld, dp, DEFAULT))
        per_gpu = [r["throughput"] / dp for r in rs]
        wb = mean([_service(r, True) for r in rs])
        out.append({
            "cell": f"{wl} {sc.upper()} {ld}", "dp": dp, "name": name, "kind": label(rs[0], count=False),
            "order": rank(rs[0]), "seeds": len(rs),
            "per_gpu": per_gpu,
            "vs_gateway": mean(per_gpu) / mean([r["throughput"] / dp for r in same_d]) if same_d else None,
            "hit": [r["cache_hit_rate"] for r in rs], "jain": [r["jain_index"] for r in rs],
            "p99": [r["well_behaved_p99_s"] for r in rs if r["well_behaved_p99_s"] is not None],
            "wb_vs_gateway": wb / mean([_service(r, True) for r in same_d]) if same_d else None,
            "c0_vs_wb": mean([_c0_vs_wb(r) for r in rs]),
        })
    return out


def mean_range(xs: list[float], fmt: str) -> str:
    """A table cell: the mean, and [min-max] when there are several values ("-" for none)."""
    if not xs:
        return "-"
    middle = format(mean(xs), fmt)
    return middle if len(xs) == 1 else f"{middle} [{min(xs):{fmt}}-{max(xs):{fmt}}]"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(runs: list[Row]) -> str:
    """The fleet table: mean [min-max] over seeds; ratios of means."""
    head = ["cell", "D", "routing", "K tok/s per GPU", "/ gateway's", "hit rate", "Jain",
            "well-behaved P99 s", "well-behaved service / gateway's", "c0 / a well-behaved client"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for e in summarize(runs):
        p99 = ".1f" if e["p99"] and mean(e["p99"]) >= 10 else ".2f"
        cols = [e["cell"], str(e["dp"]), e["name"], mean_range([x / 1000 for x in e["per_gpu"]], ".2f"),
                _ratio(e["vs_gateway"]), mean_range(e["hit"], ".3f"), mean_range(e["jain"], ".3f"),
                mean_range(e["p99"], p99), _ratio(e["wb_vs_gateway"]), f"{e['c0_vs_wb']:.2f}"]
        lines.append("| " + " | ".join(cols) + " |")
    return "\n".join(lines)


PANELS = (("per_gpu", "K tok/s per GPU", 1e-3), ("hit", "hit rate", 1.0), ("jain", "Jain's index", 1.0),
          ("p99", "well-behaved P99 (s)", 1.0))


def plot(runs: list[Row], path: Path) -> None:
    """A row per cell, a panel per metric; a bar per configuration (mean, min-max whiskers), a group
    per D; the dashed lines: the gateway's default at each D."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    entries = summarize(runs)
    cells = list(dict.fromkeys(e["cell"] for e in entries))
    names = list(dict.fromkeys(e["kind"] for e in sorted(entries, key=lambda e: e["order"])))
    colors = {n: f"C{i}" for i, n in enumerate(names)}
    fig, axes = plt.subplots(len(cells), len(PANELS), figsize=(16, 3.4 * len(cells)), squeeze=False)
    for row, cell in zip(axes, cells, strict=True):
        mine = [e for e in entries if e["cell"] == cell]
        for ax, (key, title, scale) in zip(row, PANELS, strict=True):
            xs = [i + 0.6 * (e["dp"] != mine[0]["dp"]) for i, e in enumerate(mine)]
            for x, e in zip(xs, mine, strict=True):
                vals = [v * scale for v in e[key]]
                if vals:
                    m = mean(vals)
                    ax.bar(x, m, color=colors[e["kind"]], width=0.8,
                           yerr=[[m - min(vals)], [max(vals) - m]], capsize=2)
            for x0, ref in ((x, e) for x, e in zip(xs, mine, strict=True) if e["name"] == DEFAULT and e[key]):
                span = [x for x, e in zip(xs, mine, strict=True) if e["dp"] == ref["dp"]]
                ax.hlines(mean([v * scale for v in ref[key]]), x0 - 0.4, max(span) + 0.4, color="k", lw=0.8,
                          ls="--")
            if key == "per_gpu":
                ax.set_ylim(bottom=0.8 * min(mean(e[key]) * scale for e in mine))
            ax.set_xticks(xs, [f"D={e['dp']}" if i == 0 or e["dp"] != mine[i - 1]["dp"] else ""
                               for i, e in enumerate(mine)], fontsize=7)
            ax.set_title(f"{cell}: {title}", fontsize=8)
            ax.tick_params(labelsize=7)
    handles = [Patch(color=colors[n]) for n in names]
    fig.legend(handles, names, loc="lower center", ncol=4, fontsize=7)
    fig.suptitle("The gateway (one router over every worker) against a load balancer over servers with "
                 "their own routers; dlpm_light workers; dashed: the gateway's default", fontsize=9)
    fig.tight_layout(rect=(0, 0.9 / fig.get_figheight(), 1, 1 - 0.35 / fig.get_figheight()))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
