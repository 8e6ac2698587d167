"""Figures and tables of ``scripts/reproduce_paper.py`` (needs matplotlib: the ``sim`` extra).

``render(results, out)`` draws docs/img/fig{1,7,10,11}.png from the results dict and rewrites the
generated section of ``out/results.md`` (between the BEGIN/END GENERATED markers) with tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

BEGIN, END = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
METRICS = (("throughput", "throughput (tokens/s)"), ("jain_index", "Jain's index"),
           ("well_behaved_p50_s", "well-behaved P50 (s)"))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.0f}"
    return str(v)


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    """A markdown table; a quantum of 0 (the policy has none) shows as '-'."""
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [_fmt(None if c in ("q_u", "q_w") and not r.get(c) else r.get(c)) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_fig1(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for r in rows:
        label = r["policy"].upper() + (f" Q^u={r['q_u']:g}" if r["policy"] == "dlpm" else "")
        marker = {"lpm": "s", "vtc": "^", "dlpm": "o"}[r["policy"]]
        ax.scatter(r["jain_index"], r["throughput"], marker=marker)
        ax.annotate(label, (r["jain_index"], r["throughput"]), fontsize=7)
    ax.set_xlabel("Jain's fairness index")
    ax.set_ylabel("throughput (perceived tokens/s)")
    ax.set_title("Fig. 1 (sim): one A10, Llama-3.2-3B, ToT S1", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_fig7(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    groups = sorted({(r["workload"], r["scenario"]) for r in rows})
    fig, axes = plt.subplots(len(groups), 3, figsize=(11, 2.4 * len(groups)), squeeze=False)
    for i, (wl, sc) in enumerate(groups):
        sub = [r for r in rows if r["workload"] == wl and r["scenario"] == sc]
        for j, (key, label) in enumerate(METRICS):
            ax = axes[i][j]
            for sched in dict.fromkeys(r["scheduler"] for r in sub):
                pts = [(r["dp"], r[key]) for r in sub if r["scheduler"] == sched and r[key] is not None]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=sched)
            ax.set_title(f"{sc.upper()}@{wl}: {label}", fontsize=8)
            ax.set_xlabel("D (GPUs)", fontsize=7)
            ax.tick_params(labelsize=7)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_fig10(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 3.4), squeeze=False)
    for ax, sc in zip(axes[0], scenarios, strict=True):
        sub = [r for r in rows if r["scenario"] == sc]
        d2 = [r for r in sub if r["scheduler"] == "D²LPM"]
        ax.plot([r["q_w"] for r in d2], [r["throughput"] for r in d2], marker="o", label="D²LPM")
        for r in sub:
            if r["scheduler"] != "D²LPM":
                ax.axhline(r["throughput"], linestyle="--", linewidth=1, label=r["scheduler"],
                           color={"RR+LPM": "C1", "Preble": "C2", "VTC": "C3"}[r["scheduler"]])
        ax.set_xscale("log")
        ax.set_xlabel("Q^w")
        ax.set_ylabel("throughput")
        ax2 = ax.twinx()
        ax2.plot([r["q_w"] for r in d2], [r["jain_index"] for r in d2], "k:", marker="x",
                 label="Jain (D²LPM)")
        ax2.set_ylabel("Jain's index")
        ax2.set_ylim(0.0, 1.05)
        ax.set_title(f"Fig. 10 (sim): D=4, ToT, scenario {sc}", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_fig11(rows: list[dict[str, Any]], path: Path) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for policy in ("lpm", "vtc", "dlpm"):
        pts = [(r["clients"], r["throughput"]) for r in rows if r["policy"] == policy]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=policy.upper())
    ax.set_xlabel("clients")
    ax.set_ylabel("throughput (perceived tokens/s)")
    ax.set_title("Fig. 11 (sim): one A10, ToT, constant total rate", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


PLOTS = {"fig1": plot_fig1, "fig7": plot_fig7, "fig10": plot_fig10, "fig11": plot_fig11}
COLUMNS = {
    "fig1": ["policy", "q_u", "throughput", "jain_index", "well_behaved_p50_s", "cache_hit_rate"],
    "fig7": ["workload", "scenario", "dp", "scheduler", "throughput", "jain_index", "well_behaved_p50_s",
             "well_behaved_p99_s", "cache_hit_rate"],
    "fig10": ["scenario", "scheduler", "q_w", "throughput", "jain_index", "well_behaved_p50_s",
              "cache_hit_rate"],
    "fig11": ["clients", "policy", "throughput", "jain_index", "cache_hit_rate"],
}


def render(results: dict[str, Any], out: Path) -> None:
    """Write the PNGs and the generated tables of docs/results.md."""
    img = out / "img"
    img.mkdir(parents=True, exist_ok=True)
    parts = []
    for name in ("fig1", "fig7", "fig10", "fig11"):
        if name not in results:
            continue
        rows = results[name]["rows"]
        PLOTS[name](rows, img / f"{name}.png")
        parts.append(f"### {name} (arrivals over {results[name]['duration']:g} s, seed "
                     f"{results[name]['seed']}, {results[name]['wall_s']:g} s of wall time)\n\n"
                     f"![{name}](img/{name}.png)\n\n{table(rows, COLUMNS[name])}\n")
    doc = out / "results.md"
    text = doc.read_text() if doc.exists() else f"# Results\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1] if END in rest else ""
    doc.write_text(head + BEGIN + "\n" + "\n".join(parts) + END + tail)
