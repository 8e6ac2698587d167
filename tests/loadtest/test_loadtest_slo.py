"""SLO metrics of ``sglang-fair bench`` from hand-built SSE streams: per-token times from
the streamed chunks, TPOT as the worst running average ([3]), attainment and goodput, all through
``metrics/slo.py``."""

from __future__ import annotations

import json

import pytest

from sglang_fair.loadtest.summary import slo_stats
from sglang_fair.loadtest.transport import CallOutcome, _on_line


def stream(sent: float, times: list[float], per_chunk: list[int], counts: bool = True) -> CallOutcome:
    """A call sent at ``sent`` whose chunks arrive at ``times`` with ``per_chunk`` tokens each."""
    out = CallOutcome(sent)
    total = 0
    for t, n in zip(times, per_chunk, strict=True):
        total += n
        chunk = {"choices": [{"index": 0, "text": "x" * n}]}
        if counts:
            chunk["usage"] = {"prompt_tokens": 5, "completion_tokens": total}
        assert _on_line(b"data: " + json.dumps(chunk).encode(), out, lambda t=t: t)
    assert not _on_line(b"data: [DONE]", out, lambda: 0.0)
    out.completion_tokens, out.finished = total, times[-1]
    return out


def test_ttft_tpot_attainment_and_goodput_of_hand_built_streams() -> None:
    calls = [
        stream(0.0, [0.5, 0.54, 0.58, 0.62], [1, 1, 1, 1]),  # TTFT 0.5, TPOT 0.04: meets both
        stream(1.0, [1.2, 1.25, 1.5], [1, 1, 1]),  # a late token: max running average (1.5-1.2)/2 = 0.15
        stream(2.0, [5.0, 5.02], [1, 2]),  # TTFT 3 s: misses; two tokens in one chunk share its time
        CallOutcome(3.0, error="http_503"),  # never answered: counts, as missing its TTFT
    ]
    out = slo_stats(calls, ttft=2.0, tpot=0.05, duration=10.0)
    assert out["requests"] == 4 and out["slo_attainment"] == 0.25 and out["goodput"] == pytest.approx(0.1)
    assert out["ttft_attainment"] == 0.5 and out["tpot_attainment"] == 0.5
    assert out["ttft_p50"] == pytest.approx(0.5) and out["ttft_p99"] == float("inf")
    assert out["tpot_p99"] == pytest.approx(0.15) and out["tpot_p50"] == pytest.approx(0.04)
    # a stall after the first token: the mean TPOT ((0.53 - 0.1) / 4 = 0.1075 s) would pass a 0.2 s
    # target; the worst running average (0.4 s at the second token) does not
    stalled = stream(0.0, [0.1, 0.5, 0.51, 0.52, 0.53], [1, 1, 1, 1, 1])
    assert slo_stats([stalled], 2.0, 0.2, 1.0)["tpot_p50"] == pytest.approx(0.4)
    assert slo_stats([stalled], 2.0, 0.2, 1.0)["slo_attainment"] == 0.0


def test_without_per_chunk_counts_tokens_are_spread_over_the_chunks() -> None:
    call = stream(0.0, [1.0, 1.1, 1.2], [2, 2, 2], counts=False)
    call.completion_tokens = 6
    out = slo_stats([call], 2.0, 0.05, 1.0)
    assert out["ttft_p50"] == pytest.approx(1.0) and out["tpot_p50"] == pytest.approx(0.1 / 2)
