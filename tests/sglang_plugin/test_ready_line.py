"""The one line ``serve`` prints when ready names the URL, the policies and where the figures are."""

from __future__ import annotations

from types import SimpleNamespace

from sglang_fair.sglang_plugin.ready import ready_line
from sglang_fair.sglang_plugin.router_link import RouterLink


def args(**kw: object) -> SimpleNamespace:
    base: dict[str, object] = {"host": "127.0.0.1", "port": 30000, "schedule_policy": "dlpm_light",
                               "dp_size": 1, "load_balance_method": "round_robin"}
    return SimpleNamespace(**{**base, **kw})


def test_one_worker() -> None:
    line = ready_line(args(), None, keys=False)
    assert line == ("sglang-fair: ready on http://127.0.0.1:30000: admission dlpm_light on 1 worker; "
                    "per-client figures at http://127.0.0.1:30000/fairness, "
                    "the page at http://127.0.0.1:30000/fairness/ui")


def test_the_router_and_its_view_are_named() -> None:
    line = ready_line(args(dp_size=2), RouterLink("/tmp/x", 2, policy="fair_cache_aware"), keys=True)
    assert "on 2 workers; routing fair_cache_aware (http://127.0.0.1:30000/fairness/router)" in line
    assert line.endswith("/fairness (with an API key), the page at http://127.0.0.1:30000/fairness/ui")
    plain = ready_line(args(dp_size=2, schedule_policy="fcfs"), None, keys=False)
    assert "admission fcfs on 2 workers; routing SGLang's round_robin" in plain
