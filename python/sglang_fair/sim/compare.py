"""What a comparison of router:policy pairs says: a two-line verdict and one picture.

Both read the summaries of :func:`sglang_fair.metrics.summary.summarize` (one per pair, keyed
"router:policy"). The verdict names the pair under which the well-behaved clients wait longest, then
what the fair pair (the default, else the one with the highest Jain's index) costs against the fastest
other pair.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sglang_fair.core.errors import ConfigError

DEFAULT_PAIR = "fair_cache_aware:dlpm_light"
Summary = dict[str, Any]


def verdict(summaries: dict[str, Summary]) -> list[str]:
    """Two lines (empty when fewer than two pairs): who is starved under which pair, what fairness costs."""
    if len(summaries) < 2:
        return []
    fair = (DEFAULT_PAIR if DEFAULT_PAIR in summaries
            else max(summaries, key=lambda n: summaries[n]["jain_index"]))
    others = {n: s for n, s in summaries.items() if n != fair}
    worst = max(others, key=lambda n: others[n]["well_behaved_p99_s"])
    fastest = max(others, key=lambda n: others[n]["throughput"])
    f, w, q = summaries[fair], others[worst], others[fastest]
    starved = (f"Starved: under {worst} the well-behaved clients wait {w['well_behaved_p99_s']:.0f} s at P99 "
               f"({w['well_behaved_p99_s'] / max(f['well_behaved_p99_s'], 1e-9):.1f}x {fair}'s "
               f"{f['well_behaved_p99_s']:.0f} s; Jain's index {w['jain_index']:.2f} vs "
               f"{f['jain_index']:.2f}).")
    cost = (f"Fairness costs: {fair} has {f['throughput'] / max(q['throughput'], 1e-9):.2f}x the "
            f"throughput of the fastest other pair ({fastest}), cache hit rate {f['cache_hit_rate']:.2f} vs "
            f"{q['cache_hit_rate']:.2f}, Jain's index {f['jain_index']:.2f} vs {q['jain_index']:.2f}.")
    return [starved, cost]


def plot_compare(summaries: dict[str, Summary], path: Path) -> Path:
    """One PNG: each pair's P99 latency per client, throughput, well-behaved P99 and Jain's index."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'sglang-fair[sim]'") from None
    names = list(summaries)
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8), gridspec_kw={"width_ratios": [2, 1, 1, 1]})
    _client_p99(axes[0], summaries, names)
    for ax, key, title in zip(axes[1:], ("throughput", "well_behaved_p99_s", "jain_index"),
                              ("throughput (tokens/s)", "well-behaved P99 (s)", "Jain's index"), strict=True):
        ax.barh(names, [summaries[n][key] for n in names], color="tab:gray")
        ax.set_title(title, fontsize=9)
        ax.invert_yaxis()
        ax.set_yticklabels([])
    axes[0].invert_yaxis()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _client_p99(ax: Any, summaries: dict[str, Summary], names: list[str]) -> None:
    clients = sorted({c for s in summaries.values() for c in s.get("clients", {})})
    height = 0.8 / max(len(clients), 1)
    for k, client in enumerate(clients):
        values = [summaries[n].get("clients", {}).get(client, {}).get("p99_s", 0.0) for n in names]
        bad = any(summaries[n].get("clients", {}).get(client, {}).get("misbehaving") for n in names)
        ax.barh([i - 0.4 + (k + 0.5) * height for i in range(len(names))], values, height=height,
                label=client + (" (misbehaving)" if bad else ""), hatch="//" if bad else None)
    ax.set_yticks(range(len(names)), names)
    ax.set_title("P99 latency per client (s)", fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
