"""What the fairness page drew, read in a real browser, against what ``/fairness`` says (the page's tests
and ``sglang-fair lab page-shot``).

:func:`look` loads ``BASE/fairness/ui`` in headless Chromium (with the key in the address's fragment),
waits for ``renders`` renderings of its data, and reads back the chart's areas (one per client drawn:
its path's length and its summed share) and the table's cells (``data-value`` of each client's row).
:func:`drawn_problems` lists where that disagrees with ``/fairness``: a client that has had service in the
page's window but no area, a figure of the table that is not ``/fairness``'s, a console error, a request
to anywhere but the page's own server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from sglang_fair.harness.browser import Visit, visit_page

READ = """(() => ({
  areas: Object.fromEntries([...document.querySelectorAll("#chart path.area")].map(
      (p) => [p.dataset.client, {path: p.getAttribute("d").length, share: Number(p.dataset.share)}])),
  rows: Object.fromEntries([...document.querySelectorAll("#clients tr[data-client]")].map(
      (tr) => [tr.dataset.client, Object.fromEntries([...tr.querySelectorAll("td[data-field]")].map(
          (td) => [td.dataset.field, td.dataset.value]))])),
  workers: [...document.querySelectorAll("#workers tr[data-worker]")].map((tr) => tr.dataset.worker),
  gap: document.getElementById("gap") ? document.getElementById("gap").dataset.value : null,
  status: document.getElementById("status").textContent,
}))()"""
COMPARED = ("service", "waiting", "running", "requests")  # the table's columns from /fairness


def look(base: str, key: str | None = None, renders: int = 2, timeout: float = 60.0) -> Visit:
    """The page at ``base`` once it has drawn its data ``renders`` times (``Visit.value``: :data:`READ`)."""
    url = base.rstrip("/") + "/fairness/ui" + (f"#key={key}" if key else "")
    return visit_page(url, f"Number(document.body.dataset.rendered) >= {renders}", READ, timeout)


def drawn_problems(visit: Visit, fairness: Mapping[str, Any], base: str) -> list[str]:
    """Where the page ``visit`` read disagrees with ``fairness`` (``/fairness``'s answer at ``base``)."""
    drawn, problems = visit.value or {}, [f"console: {e}" for e in visit.errors]
    origin = urlsplit(base).netloc
    problems += [f"fetched {u}" for u in visit.fetched
                 if urlsplit(u).netloc != origin and not u.startswith("data:")]
    rows = drawn.get("rows", {})
    for client, figures in fairness["clients"].items():
        row = rows.get(client)
        if row is None:
            problems.append(f"{client}: no row in the table")
            continue
        for name in COMPARED:
            if float(row.get(name) or 0) != float(figures.get(name) or 0):
                problems.append(f"{client}: {name} {row.get(name)} on the page, "
                                f"{figures.get(name)} at /fairness")
        tokens = float(figures.get("input_tokens") or 0)
        rate = round(float(figures.get("cached_tokens") or 0) / tokens, 4) if tokens else None
        if (float(row["hit_rate_total"]) if row.get("hit_rate_total") else None) != rate:
            shown = row.get("hit_rate_total")
            problems.append(f"{client}: hit rate {shown} on the page, {rate} at /fairness")
    return problems


def series_problems(visit: Visit, served: set[str]) -> list[str]:
    """Clients ``served`` in the page's window without an area of non-zero share in the chart."""
    areas = (visit.value or {}).get("areas", {})
    return [f"{c}: no area in the chart" for c in sorted(served)
            if c not in areas or areas[c]["path"] == 0 or areas[c]["share"] <= 0]
