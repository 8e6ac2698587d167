"""The frontier's verdicts: per cell, how far the default pair is from the best of every pair.

Targets, per cell (docs/evidence/frontier.md): the default's throughput at least 0.97x the best pair's; its
Jain's index at least the best among the pairs within 0.97x of the best throughput, minus 0.02; no client
backlogged through a 20-s window below half its weighted fair share there (``window_floor`` >= 0.5); the
4:1 pair of ``weighted`` within [3.2, 4.8] in every window; ``flood``'s light clients no slower than
under the earlier default (``--today``: a results file of it, when given).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

THROUGHPUT, JAIN_SLACK, FLOOR, RATIO = 0.97, 0.02, 0.5, (3.2, 4.8)
Row = dict[str, Any]


def by_cell(rows: list[Row]) -> dict[str, dict[str, Row]]:
    """cell name -> "router:policy" -> its seeds' rows in one (:func:`merge`; of two rows of the same
    seed the later counts)."""
    seeds: dict[str, dict[str, dict[int, Row]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        seeds[r["cell"]][f"{r['router']}:{r['policy']}"][r.get("seed", 0)] = r
    return {cell: {pair: merge(list(by_seed.values())) for pair, by_seed in pairs.items()}
            for cell, pairs in seeds.items()}


def merge(rows: list[Row]) -> Row:
    """A pair's seeds as one row: means of throughput, Jain's index and latencies, the least window
    floor (the target is every window), every window's weight ratio."""
    def mean(key: str) -> float | None:
        xs = [r[key] for r in rows if r.get(key) is not None]
        return sum(xs) / len(xs) if xs else None

    floors = [r["window_floor"] for r in rows if r.get("window_floor") is not None]
    out = {**rows[0], "seeds": len(rows), "window_floor": min(floors) if floors else None}
    for key in ("throughput", "jain_index", "well_behaved_p99_s", "light_p99_s", "cache_hit_rate"):
        out[key] = mean(key)
    if rows[0].get("weight_ratios") is not None:
        out["weight_ratios"] = [x for r in rows for x in r.get("weight_ratios") or []]
    return out


def verdict(pairs: dict[str, Row], default: str, today: Row | None = None) -> dict[str, Any] | None:
    """The default's figures in one cell against the targets (None if it has no row there)."""
    mine = pairs.get(default)
    if mine is None:
        return None
    best_pair, best = max(((p, r["throughput"]) for p, r in pairs.items()), key=lambda x: x[1])
    fair = [(p, r["throughput"]) for p, r in pairs.items() if starves_nobody(r, mine)]
    best_fair_pair, best_fair = max(fair, key=lambda x: x[1]) if fair else (best_pair, best)
    near = [r for r in pairs.values() if r["throughput"] >= THROUGHPUT * best]
    jain_need = max(r["jain_index"] for r in near) - JAIN_SLACK
    out: dict[str, Any] = {
        "cell": mine["cell"], "best": best_pair, "throughput_ratio": round(mine["throughput"] / best, 4),
        "best_fair": best_fair_pair, "fair_throughput_ratio": round(mine["throughput"] / best_fair, 4),
        "jain": mine["jain_index"], "jain_need": round(jain_need, 4), "floor": mine.get("window_floor"),
        "p99": mine.get("well_behaved_p99_s"),
    }
    misses = []
    if out["throughput_ratio"] < THROUGHPUT:
        misses.append("throughput")
    if mine["jain_index"] < jain_need - 1e-9:
        misses.append("jain")
    if out["floor"] is not None and out["floor"] < FLOOR:
        misses.append("floor")
    ratios = [x for x in mine.get("weight_ratios") or [] if x is not None]
    if mine.get("weight_ratios") is not None:
        out["ratios"] = (min(ratios), max(ratios)) if ratios else None
        if not ratios or len(ratios) < len(mine["weight_ratios"]) or \
                not RATIO[0] <= min(ratios) <= max(ratios) <= RATIO[1]:
            misses.append("weights")
    if mine.get("light_p99_s") is not None:
        out["light_p99"] = mine["light_p99_s"]
        if today is not None and today.get("light_p99_s") is not None:
            out["light_p99_today"] = today["light_p99_s"]
            if mine["light_p99_s"] > today["light_p99_s"]:
                misses.append("light")
    out["misses"] = misses
    return out


def starves_nobody(row: Row, mine: Row) -> bool:
    """A pair that keeps every backlogged client at half its fair share or more and serves the light
    clients (where the default's run has them)."""
    floor = row.get("window_floor")
    light_ok = mine.get("light_p99_s") is None or row.get("light_p99_s") is not None
    return (floor is None or floor >= FLOOR) and light_ok


def verdicts(rows: list[Row], default: str, today_rows: list[Row] | None = None) -> list[dict[str, Any]]:
    today = {r["cell"]: r for r in today_rows or [] if f"{r['router']}:{r['policy']}" == default}
    out = [verdict(pairs, default, today.get(cell)) for cell, pairs in by_cell(rows).items()]
    return [v for v in out if v is not None]


def summary(vs: list[dict[str, Any]]) -> str:
    """One line per target: in how many cells it is met."""
    n = len(vs)
    lines = [f"cells: {n}; every target met in {sum(1 for v in vs if not v['misses'])}; throughput at least "
             f"{THROUGHPUT}x the best pair that starves nobody in "
             f"{sum(1 for v in vs if v['fair_throughput_ratio'] >= THROUGHPUT)}"]
    for target in ("throughput", "jain", "floor", "weights", "light"):
        judged = [v for v in vs if target in v["misses"] or _judged(v, target)]
        missed = [v["cell"] for v in judged if target in v["misses"]]
        more = " ..." if len(missed) > 12 else ""
        lines.append(f"  {target:<10} met in {len(judged) - len(missed)} of {len(judged)}"
                     + (f"; missed: {', '.join(missed[:12])}{more}" if missed else ""))
    return "\n".join(lines)


def by_seed(rows: list[Row], default: str, today_rows: list[Row] | None = None) -> str:
    """:func:`summary` per seed, each seed's rows judged on their own (the default against the pairs that
    ran that seed: every pair at seed 0, the contenders at the others). Seeds move the counts by more than
    most changes do, so a change is judged over every seed, not over seed 0 or over the seeds' means."""
    seeds = sorted({r.get("seed", 0) for r in rows})
    return "\n".join(f"seed {k}: " + summary(verdicts([r for r in rows if r.get("seed", 0) == k], default,
                                                        today_rows)) for k in seeds)


def _judged(v: dict[str, Any], target: str) -> bool:
    return {"throughput": True, "jain": True, "floor": v.get("floor") is not None,
            "weights": "ratios" in v, "light": "light_p99_today" in v}[target]


def table(vs: list[dict[str, Any]]) -> str:
    """The markdown table of every cell."""
    head = ("| cell | best pair | thr / best | best pair starving nobody | thr / it | Jain | need | floor | "
            "4:1 windows | light P99 s (earlier) | misses |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    lines = [head]
    for v in vs:
        ratios = v.get("ratios")
        r = f"{ratios[0]:.2f}-{ratios[1]:.2f}" if ratios else ("none" if "ratios" in v else "")
        light = f"{v['light_p99']:.2f}" if "light_p99" in v else ""
        if "light_p99_today" in v:
            light += f" ({v['light_p99_today']:.2f})"
        floor = "" if v["floor"] is None else f"{v['floor']:.2f}"
        lines.append(f"| {v['cell']} | {v['best']} | {v['throughput_ratio']:.3f} | {v['best_fair']} | "
                     f"{v['fair_throughput_ratio']:.3f} | {v['jain']:.3f} | "
                     f"{v['jain_need']:.3f} | {floor} | {r} | {light} | {', '.join(v['misses'])} |")
    return "\n".join(lines)


def _operating_point(column: str) -> tuple[str, int, int]:
    """A grid column (``D=4 M=256 A100``) in the order preset, running per worker, workers."""
    dp, cap, preset = column.split()
    return preset, int(cap[2:]), int(dp[2:])


def plot(vs: list[dict[str, Any]], path: Path) -> None:
    """The grid: one row per workload, one column per operating point; the colour is the default's
    throughput against the best pair's, a cross where a fairness target is missed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def split(cell: str) -> tuple[str, str]:
        head, _, rest = cell.partition(" D=")
        return head, "D=" + rest

    rows = list(dict.fromkeys(split(v["cell"])[0] for v in vs))
    cols = sorted(dict.fromkeys(split(v["cell"])[1] for v in vs), key=_operating_point)
    grid = [[float("nan")] * len(cols) for _ in rows]
    fig, ax = plt.subplots(figsize=(max(5.0, 2.5 + 0.7 * len(cols)), 1.2 + 0.32 * len(rows)))
    for v in vs:
        i, j = (rows.index(split(v["cell"])[0]), cols.index(split(v["cell"])[1]))
        grid[i][j] = v["throughput_ratio"]
        unfair = [m for m in v["misses"] if m != "throughput"]
        ax.text(j, i, f"{v['throughput_ratio']:.2f}" + (" x" if unfair else ""), ha="center", va="center",
                fontsize=5.5, color="black")
    for i, j in itertools.product(range(len(rows)), range(len(cols))):
        if math.isnan(grid[i][j]):
            ax.text(j, i, "not run", ha="center", va="center", fontsize=5, color="grey")
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0.85, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
    ax.set_yticks(range(len(rows)), rows, fontsize=6)
    fig.colorbar(image, ax=ax, label="default's throughput / best pair's", shrink=0.6)
    ax.set_title("The default's throughput / the best pair's per cell\n(x: a fairness target missed)",
                 fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
