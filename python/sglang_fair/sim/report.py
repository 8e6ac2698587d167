"""Presenting runs: the summary table and the service-over-time plots ([1] Fig. 8/9)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sglang_fair.core.errors import ConfigError
from sglang_fair.metrics import RunResult

COLUMNS = (
    ("throughput", "throughput", "{:.0f}"),
    ("actual_service_rate", "actual/s", "{:.0f}"),
    ("jain_index", "jain", "{:.3f}"),
    ("well_behaved_p50_s", "p50 s", "{:.1f}"),
    ("well_behaved_p99_s", "p99 s", "{:.1f}"),
    ("cache_hit_rate", "hit", "{:.3f}"),
    ("max_backlogged_service_diff", "max diff", "{:.0f}"),
    ("makespan_s", "makespan", "{:.1f}"),
    ("retractions", "retract", "{:d}"),
)


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """``--json``, ``--plot-dir`` and ``--progress``, the same for ``sim`` and ``bench``."""
    parser.add_argument("--json", default="", metavar="PATH", help="write the summary as JSON")
    parser.add_argument("--plot-dir", default="", metavar="DIR", help="write service-over-time PNGs")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="print progress to stderr")


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def format_table(runs: dict[str, dict[str, Any]]) -> str:
    """One row per run (``router:policy``), the headline metrics as columns."""
    width = max(12, *(len(k) for k in runs))
    head = f"{'run':<{width}} " + " ".join(f"{label:>10}" for _, label, _ in COLUMNS)
    rows = [head, "-" * len(head)]
    for name, summary in runs.items():
        cells = " ".join(f"{_cell(summary.get(key), fmt):>10}" for key, _, fmt in COLUMNS)
        rows.append(f"{name:<{width}} {cells}")
    return "\n".join(rows)


def format_clients(summary: dict[str, Any]) -> str:
    """Per-client service and latency of one run."""
    lines = [f"{'client':<28} {'service':>10} {'actual':>10} {'p50 s':>8} {'p99 s':>8} {'requests':>9}"]
    for c, v in summary["clients"].items():
        tag = " (misbehaving)" if v.get("misbehaving") else ""
        lines.append(f"{(c + tag):<28} {_cell(v['service'], '{:.0f}'):>10} "
                     f"{_cell(v['actual_service'], '{:.0f}'):>10} "
                     f"{_cell(v['p50_s'], '{:.1f}'):>8} {_cell(v['p99_s'], '{:.1f}'):>8} {v['requests']:>9}")
    return "\n".join(lines)


def plot_service(results: dict[str, RunResult], plot_dir: Path, smooth: int = 5,
                 kinds: tuple[str, ...] = ("actual", "perceived")) -> list[Path]:
    """One PNG per run: service rate per client over time, as spent and as the client sees it
    (``kinds`` picks the panels: a real run without cached-token counts has no actual service)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot-dir needs matplotlib: pip install 'sglang-fair[sim]'") from None
    plot_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, res in results.items():
        panels = [(k, t) for k, t in (("actual", "actual service (extend + output)"),
                                      ("perceived", "service as the client sees it (input + output)"))
                  if k in kinds]
        fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 3.6), sharex=True,
                                 squeeze=False)
        clients = sorted({p.client for p in res.programs})
        for ax, (kind, title) in zip(axes[0], panels, strict=True):
            for c in clients:
                series = res.ledger.series(c, kind, res.end_time)
                rate = _moving_average(series, smooth)
                xs = [(k + 0.5) * res.ledger.window for k in range(len(rate))]
                ax.plot(xs, [v / res.ledger.window for v in rate], label=c, linewidth=1)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("time (s)")
            ax.set_ylabel("weighted tokens / s")
        axes[0][-1].legend(fontsize=7, ncol=2)
        fig.suptitle(name, fontsize=10)
        fig.tight_layout()
        path = plot_dir / f"service_{name.replace(':', '_')}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def service_series(res: RunResult, kind: str = "perceived") -> dict[str, Any]:
    """Service per client per metrics window (``{"window": s, "kind": ..., "clients": {c: [...]}}``):
    what ``--json`` writes under ``service_series`` so a report can overlay runs from their JSON."""
    clients = sorted({p.client for p in res.programs})
    return {"window": res.ledger.window, "kind": kind,
            "clients": {c: [round(v, 1) for v in res.ledger.series(c, kind, res.end_time)] for c in clients}}


def plot_overlay(runs: dict[str, dict[str, Any]], path: Path, title: str = "", smooth: int = 5) -> Path:
    """Service rate per client over time of several runs on one axis (one colour per client, one line
    style per run), from each run's :func:`service_series`: a simulated and a real run, say."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install 'sglang-fair[sim]'") from None
    fig, ax = plt.subplots(figsize=(8, 3.8))
    styles = ("-", "--", ":", "-.")
    clients = sorted({c for series in runs.values() for c in series["clients"]})
    for i, (name, series) in enumerate(runs.items()):
        window = float(series["window"])
        for j, c in enumerate(clients):
            rate = _moving_average(list(series["clients"].get(c, [])), smooth)
            xs = [(k + 0.5) * window for k in range(len(rate))]
            ax.plot(xs, [v / window for v in rate], styles[i % len(styles)], color=f"C{j}",
                    label=f"{c} {name}", linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("weighted tokens / s")
    ax.set_title(title or " vs ".join(runs), fontsize=9)
    ax.legend(fontsize=7, ncol=len(runs))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _moving_average(xs: list[float], k: int) -> list[float]:
    if k <= 1 or not xs:
        return xs
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= k:
            acc -= xs[i - k]
        out.append(acc / min(i + 1, k))
    return out
