"""How a quantum sweep's rows read, and its table, plot and JSON (the Q^u and Q^w sweeps)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_fair.experiments.runner import save_json


@dataclass(frozen=True)
class Sweep:
    """How a sweep's rows read: the key naming a run, the swept quantum and what the plot shows."""

    who: str  # "policy" or "pair"
    q: str  # "q_u" or "q_w"
    label: str
    variants: tuple[str, ...]
    baselines: tuple[str, ...]
    panels: tuple[tuple[str, str], ...] = (("light_p99_s", "light P99 (s)"),
                                           ("flooder_hit_rate", "c0 hit rate"))


def table(rows: list[dict[str, Any]], sweep: Sweep) -> str:
    """One line per run: the swept quantum, light P99, c0's hit rate, throughput, Jain's index."""
    width = max(len(sweep.who), *(len(r[sweep.who]) for r in rows))
    lines = [f"{'scenario':<9} {sweep.who:<{width}} {sweep.label:>7} {'light P99 s':>11} {'c0 hit':>7} "
             f"{'thr tok/s':>10} {'Jain':>6}"]
    for r in rows:
        q = f"{r[sweep.q]:g}" if r[sweep.q] else "-"
        p99 = "-" if r["light_p99_s"] is None else f"{r['light_p99_s']:.2f}"
        lines.append(f"{r['scenario']:<9} {r[sweep.who]:<{width}} {q:>7} {p99:>11} "
                     f"{r['flooder_hit_rate']:>7.4f} {r['throughput']:>10.0f} {r['jain_index']:>6.3f}")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, sweep: Sweep) -> None:
    """One column per scenario, one row per panel; the variants over the quantum, baselines dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["scenario"] for r in rows))
    panels = sweep.panels
    fig, axes = plt.subplots(len(panels), len(names), figsize=(3.2 * len(names), 2.75 * len(panels)),
                             squeeze=False)
    for j, name in enumerate(names):
        mine = [r for r in rows if r["scenario"] == name]
        for i, (key, label) in enumerate(panels):
            ax = axes[i][j]
            for run, style in zip(sweep.variants, ("o-", "s-"), strict=True):
                pts = [(r[sweep.q], r[key]) for r in mine if r[sweep.who] == run]
                ax.plot([q for q, _ in pts], [v for _, v in pts], style, label=run)
            for run, color in zip(sweep.baselines, ("grey", "tab:green", "tab:red"), strict=True):
                val = next(r[key] for r in mine if r[sweep.who] == run)
                if val is not None:
                    ax.axhline(val, color=color, ls="--", lw=1, label=run)
            ax.set_xscale("log", base=2)
            if key == "light_p99_s":
                ax.set_yscale("log")
            if i == 0:
                ax.set_title(name)
            if i == len(panels) - 1:
                ax.set_xlabel(sweep.label)
            if j == 0:
                ax.set_ylabel(label)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def report(rows: list[dict[str, Any]], json_path: str, plot_path: str, sweep: Sweep) -> None:
    """Print the table; write the rows as JSON and the plot where asked."""
    print(table(rows, sweep))
    if json_path:
        save_json(Path(json_path), rows, indent=1)
    if plot_path:
        plot(rows, Path(plot_path), sweep)
        print(f"wrote {plot_path}")
