"""The fairness page's data (``GET /fairness/ui/data``), the same shape from ``serve`` and the gateway.

``{"version", "source", "policy", "window_s", "interval_s", "span_s", "bound", "gap", "series",
"clients", "workers", "totals"}``:

- ``clients``: one row per client, most served first: the ``/fairness`` figures now (``service``,
  ``perceived_service``, ``waiting``, ``running``, ``requests``, token totals, ``weight``; not the
  counters, which are each worker's own), ``in_flight`` (the gateway's
  requests relayed and not ended; None at ``serve``), ``hit_rate`` (over the window; None without
  input in it) and ``hit_rate_total``, the edge's answers (``answers``, ``refused`` = 429,
  ``client_errors``, ``server_errors``), and ``tenant``: None until tenants exist, then the tenant's
  figures (name, weight, band, budget) go there and the page groups by it;
- ``series``: :meth:`History.shares`; ``gap``: :meth:`History.gap`; ``bound``: :mod:`bound`;
- ``workers``: one row per worker (``name``, ``queue``, ``state``, ``why``), from the source.

Which clients a caller may read is decided before (``visible``): the rows, the series and the gap of
other clients are then left out, as ``/fairness`` leaves out their rows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from sglang_fair.dashboard.history import OTHERS, History

VERSION = 1
FIGURES = ("service", "perceived_service", "waiting", "running", "requests", "input_tokens", "cached_tokens",
           "output_tokens")


def merge_rows(answers: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per client, ``FIGURES`` summed over the servers' rows (``answers``: URL -> page data)."""
    merged: dict[str, dict[str, Any]] = {}
    for data in answers.values():
        for row in data.get("clients", []):
            into = merged.setdefault(row["client"], {"weight": row.get("weight", 1.0)})
            for name in FIGURES:
                into[name] = into.get(name, 0) + (row.get(name) or 0)
    return merged


def client_rows(current: Mapping[str, Mapping[str, Any]], answers: Mapping[str, Mapping[str, int]],
                hit_rates: Mapping[str, float], in_flight: Mapping[str, int] | None) -> list[dict[str, Any]]:
    """The page's rows: every client of ``current`` (``/fairness``) or of ``answers`` (the edge's)."""
    rows = []
    for client in sorted(set(current) | set(answers)):
        figures, counted = current.get(client, {}), answers.get(client, {})
        row: dict[str, Any] = {"client": client, "tenant": None, "weight": figures.get("weight", 1.0)}
        for name in FIGURES:
            value = figures.get(name)
            row[name] = value if value is not None else 0
        row["in_flight"] = None if in_flight is None else in_flight.get(client, 0)
        row["hit_rate"] = hit_rates.get(client)
        total_in = row["input_tokens"]
        row["hit_rate_total"] = round(row["cached_tokens"] / total_in, 4) if total_in else None
        row["answers"] = counted.get("requests", 0)
        for name in ("refused", "client_errors", "server_errors"):
            row[name] = counted.get(name, 0)
        rows.append(row)
    rows.sort(key=lambda r: (-float(r["service"]), r["client"]))
    return rows


def visible_series(series: dict[str, Any], allowed: Collection[str] | None) -> dict[str, Any]:
    """``series`` with only the ``allowed`` clients' shares (None: all); the rest join ``others``."""
    if allowed is None:
        return series
    kept = {c: s for c, s in series["clients"].items() if c in allowed}
    hidden = [s for c, s in series["clients"].items() if c not in allowed]
    others = [round(o + sum(h[k] for h in hidden), 4) for k, o in enumerate(series[OTHERS])]
    served = {c: v for c, v in series["served"].items() if c in allowed}
    return {**series, "clients": kept, OTHERS: others, "served": served}


def page_data(source: str, policy: str | None, history: History, now: float,
              current: Mapping[str, Mapping[str, Any]], answers: Mapping[str, Mapping[str, int]],
              workers: list[dict[str, Any]], bound: dict[str, Any],
              in_flight: Mapping[str, int] | None = None, allowed: Collection[str] | None = None,
              top: int = 8) -> dict[str, Any]:
    """The page's data. ``allowed``: the clients the caller may see (None: every client)."""
    weights = {c: float(f.get("weight") or 1.0) for c, f in current.items()}
    gap = history.gap(weights)
    series = visible_series(history.shares(now, top), allowed)
    if allowed is not None:
        current = {c: f for c, f in current.items() if c in allowed}
        answers = {c: a for c, a in answers.items() if c in allowed}
        if gap["clients"] and not set(gap["clients"]) <= set(allowed):
            gap = {**gap, "clients": None}
    rows = client_rows(current, answers, history.hit_rates(), in_flight)
    totals = {name: sum(r[name] for r in rows) for name in
              ("service", "waiting", "running", "requests", "answers", "refused", "client_errors",
               "server_errors")}
    return {"version": VERSION, "source": source, "policy": policy, "window_s": history.window_s,
            "interval_s": history.interval_s, "span_s": round(history.span(), 1), "bound": bound,
            "gap": gap, "series": series, "clients": rows, "workers": workers, "totals": totals}
