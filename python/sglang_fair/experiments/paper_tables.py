"""The markdown of ``sglang-fair lab paper`` and the other reports (standard library only, no matplotlib):
a figure's points as a table (:func:`table`; every cell the mean over the seeds with their min-max in
brackets), the measured capacities (:func:`capacity_table`), and :func:`write_generated`, which puts a
report's generated text between a document's BEGIN/END GENERATED markers and keeps the text around them.
The figures themselves are :mod:`sglang_fair.experiments.paper_plots`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglang_fair.routing import RouterConfig

BEGIN, END = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
METRICS = ["throughput", "jain_index", "well_behaved_p50_s", "well_behaved_p99_s", "cache_hit_rate",
           "latency_censored"]
QUEUE_METRICS = ["mean_wait_s", "mean_decode_batch", "retractions"]  # fig1mem: did a queue form?


def qw(p: dict[str, Any]) -> float:
    """The router quantum a point ran with (q_w 0 is the default; only the D²LPM routers have one)."""
    return p["q_w"] or (RouterConfig().quantum if p["router"].startswith("d2lpm") else 0.0)


def cell(v: dict[str, Any]) -> str:
    """A metric's mean over the seeds with their [min-max] (``-`` where it has none)."""
    m, lo, hi = v["mean"], v["lo"], v["hi"]
    if m is None:
        return "-"
    spec = ".3f" if abs(m) < 2 else ".1f" if abs(m) < 100 else ",.0f"
    return f"{m:{spec}} [{lo:{spec}}-{hi:{spec}}]"


def table(pts: list[dict[str, Any]], cols: list[str], metrics: list[str]) -> str:
    """A row per point: its ``cols`` as they are, then each of ``metrics`` as :func:`cell`."""
    head = cols + metrics
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in pts:
        cells = [(f"{qw(p):,.0f} (default)" if c == "q_w" and not p[c] and qw(p)
                  else ("-" if not p[c] else f"{p[c]:,.0f}") if c in ("q_u", "q_w")
                  else f"{p[c]:.4g}" if isinstance(p[c], float) else str(p[c])) for c in cols]
        rows.append("| " + " | ".join(cells + [cell(p[m]) for m in metrics]) + " |")
    return "\n".join(rows)


def capacity_table(caps: dict[str, Any]) -> str:
    """The measured capacities: total programs/s (arena: the trace's time scale) under RR+LPM."""
    rows = ["| workload / scenario / D / preset / branches | capacity | bracket (stable-unstable) | "
            "trials (rate: growth) | CPU s |", "|---|---|---|---|---|"]
    for combo, c in caps.items():
        if c["stable"] is None:  # a closed-loop workload's: nothing was searched
            continue
        trials = ", ".join(f"{r:.4g}: {g:+.2f}" for r, g in c["trials"])
        bracket = f"{c['stable']:.4g}-{c['unstable']:.4g}"
        rows.append(f"| {combo} | **{c['capacity']:.4g}** | {bracket} | {trials} | {c['cpu_s']:g} |")
    return "\n".join(rows)


def write_generated(doc: Path, body: str, title: str) -> None:
    """Put ``body`` between ``doc``'s BEGIN/END GENERATED markers (made, after ``title``, if missing);
    the hand-written text around them stays."""
    text = doc.read_text() if doc.exists() else f"{title}\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    doc.write_text(head + BEGIN + "\n" + body + END + tail)
