"""The fairness page in headless Chromium against a stand-in server (no SGLang): it draws every client's
area and row with /fairness's numbers, and the checks the end-to-end test relies on can fail: a number
that differs, a client without an area, a script error, a fetch from elsewhere."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from stand_in import StandIn, stand_ins

from sglang_fair.dashboard.history import History
from sglang_fair.dashboard.model import page_data
from sglang_fair.dashboard.page import page_html
from sglang_fair.harness.browser import find_chromium
from sglang_fair.harness.page_check import drawn_problems, look, series_problems

if find_chromium() is None:
    if "chromium" in os.environ.get("SGLANG_FAIR_REQUIRE_TOOLS", ""):
        pytest.fail("chromium is not installed (scripts/install_test_tools.sh)", pytrace=False)
    pytest.skip("chromium is not installed (scripts/install_test_tools.sh)", allow_module_level=True)

FAIRNESS = {c: {"service": s, "waiting": w, "running": 1, "requests": n, "input_tokens": 10 * n,
                "cached_tokens": 3 * n, "output_tokens": 2 * n, "weight": 1.0}
            for c, s, w, n in (("flood", 9000.0, 12, 40), ("chat", 3000.0, 1, 20), ("light", 700.0, 0, 9))}


def data(fairness: dict[str, Any]) -> dict[str, Any]:
    history = History(window_s=300, interval_s=2)
    for k in range(6):
        history.add(100.0 + 2 * k, {c: {**f, "service": f["service"] * k / 5} for c, f in fairness.items()})
    answers = {"flood": {"requests": 41, "refused": 1}}
    workers = [{"name": "worker 0", "queue": 14, "state": "serving", "why": None}]
    return page_data("serve", "dlpm_light", history, 110.0, fairness, answers, workers,
                     {"value": 143360.0, "formula": "2 (U + Q^u)", "source": "[1] Thm 4.1"})


class Stand(StandIn):
    body: dict[str, Any] = {}  # noqa: RUF012  (each stand-in gets its own subclass)
    html = b""

    def do_GET(self) -> None:
        if self.path == "/fairness/ui":
            self.answer(200, self.html, "text/html")
        else:
            self.answer(200, self.body)


@pytest.fixture
def stand() -> Iterator[Any]:
    with stand_ins() as start:
        yield lambda body, html=None: start(type("H", (Stand,), {"body": body, "html": html or page_html()}))


def test_the_page_draws_each_clients_area_and_row_with_the_fairness_numbers(stand: Any) -> None:
    base = stand(data(FAIRNESS))
    visit = look(base, renders=1, timeout=30)
    assert drawn_problems(visit, {"clients": FAIRNESS}, base) == []
    assert series_problems(visit, set(FAIRNESS)) == []
    assert visit.value["workers"] == ["worker 0"] and visit.value["gap"] is not None
    assert visit.screenshot.startswith(b"\x89PNG")


def test_negative_controls_a_wrong_number_a_missing_area_a_script_error_an_outside_fetch(stand: Any) -> None:
    shown = data(FAIRNESS)
    shown["clients"][0]["requests"] += 1  # the flood's row says one request more than /fairness
    del shown["series"]["clients"]["light"]  # and light has no area
    base = stand(shown)
    visit = look(base, renders=1, timeout=30)
    wrong = ["flood: requests 41 on the page, 40 at /fairness"]
    assert drawn_problems(visit, {"clients": FAIRNESS}, base) == wrong
    assert series_problems(visit, set(FAIRNESS)) == ["light: no area in the chart"]
    broken = stand({**data(FAIRNESS), "series": None})  # the script fails on it: an uncaught error
    with pytest.raises(TimeoutError, match="uncaught"):
        look(broken, renders=1, timeout=5)
    outside = page_html().replace(b"</body>", b'<img src="http://127.0.0.9:9/x.png"></body>')
    base = stand(data(FAIRNESS), outside)
    problems = drawn_problems(look(base, renders=1, timeout=30), {"clients": FAIRNESS}, base)
    assert "fetched http://127.0.0.9:9/x.png" in problems
