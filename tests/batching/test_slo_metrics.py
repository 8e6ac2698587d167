"""SLO metrics: TTFT, TPOT as the worst running average per request, attainment and goodput."""

from __future__ import annotations

import math

import pytest

from sglang_fair.metrics.slo import TokenTrack, slo_summary


def track(arrival: float, times: list[float], ttft: float = 1.0, tpot: float = 0.1) -> TokenTrack:
    t = TokenTrack(arrival, ttft, tpot)
    for x in times:
        t.on_token(x)
    return t


def test_tpot_is_the_worst_running_average_after_the_first_token() -> None:
    t = track(0.0, [0.5, 0.55, 0.6, 0.95])  # averages 0.05, 0.05, 0.15
    assert t.ttft == 0.5 and t.max_tpot == pytest.approx(0.15) and not t.met
    early_burst = track(0.0, [0.5, 0.51, 0.52, 0.7])  # a late token after a fast start: 0.2/3 <= 0.1
    assert early_burst.max_tpot == pytest.approx(0.2 / 3) and early_burst.met
    assert track(0.0, [0.2]).max_tpot == 0.0 and track(0.0, [0.2]).met
    assert track(0.0, []).ttft == math.inf and not track(0.0, []).met


def test_summary_percentiles_attainment_and_goodput() -> None:
    tracks = [track(0.0, [0.5, 0.6]), track(1.0, [3.0, 3.05]), track(2.0, [2.2, 2.9]), track(3.0, [])]
    s = slo_summary(tracks, duration=4.0)
    assert s["requests"] == 4
    assert s["ttft_attainment"] == 0.5 and s["tpot_attainment"] == 0.5 and s["slo_attainment"] == 0.25
    assert s["goodput"] == 0.25  # one request met both, in 4 s
    assert s["ttft_p50"] == pytest.approx(0.5) and s["ttft_p99"] == math.inf
    assert s["tpot_p99"] == pytest.approx(0.7)
