"""The router's Prometheus view: format and label escaping come from prometheus_client."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sglang_fair_router.http import prometheus_text

pytestmark = pytest.mark.timers

ODD = 'équipe "a"\\b\nc\t'  # non-ASCII, a quote, a backslash, a newline and a tab


def snapshot() -> dict[str, Any]:
    worker = {"worker": 0, "queue": 3, "alive": True, "cached_tokens_estimate": 120, "hit_estimate": None}
    return {"tree_tokens": 120, "inflight": 3, "counts": {"dispatched": 5, "finished": 2},
            "workers": [worker], "deficits": {ODD: [-4.0], "b": [7.5]}}


def test_metrics_parse_back_with_odd_client_names() -> None:
    families = {f.name: f for f in text_string_to_metric_families(prometheus_text(snapshot).decode())}
    samples = families["sglang_fair_router_deficit"].samples
    deficits = {(s.labels["client"], s.labels["worker"]): s.value for s in samples}
    assert deficits == {(ODD, "0"): -4.0, ("b", "0"): 7.5}
    events = {s.labels["event"]: s.value for s in families["sglang_fair_router_events"].samples
              if s.name.endswith("_total")}
    assert events == {"dispatched": 5, "finished": 2}
    assert families["sglang_fair_router_worker_queue"].samples[0].value == 3
    assert families["sglang_fair_router_worker_hit_estimate"].samples == []  # no estimate yet: no sample
