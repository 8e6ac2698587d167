"""The JSON of a real run: the simulator's summary, with what the server did not report set to null,
plus per-request latencies (TTFT, TPOT, end to end), errors per client and the server's /fairness."""

from __future__ import annotations

import math
from typing import Any

from sglang_fair.loadtest.runner import LoadRun
from sglang_fair.loadtest.transport import CallOutcome
from sglang_fair.metrics import percentile, summarize
from sglang_fair.metrics.slo import TokenTrack, slo_summary

# Keys that need cached_tokens (actual service = extend + output) or any usage at all.
NEEDS_CACHED = ("actual_service_rate", "jain_index_actual", "cache_hit_rate", "max_backlogged_service_diff")
NEEDS_USAGE = ("throughput", "jain_index", *NEEDS_CACHED)
NOT_VISIBLE = ("retractions", "workers")  # server internals a client cannot see


def missing_fields(outcomes: list[CallOutcome]) -> list[str]:
    """Usage fields that some completed call lacked. Calls cut mid-stream (deadline, Ctrl-C) do not
    count: their last usage chunk never came; they are booked with what their stream had reported."""
    answered = [o for o in outcomes if o.finished is not None and o.error is None]
    out = []
    if any(o.prompt_tokens is None or o.completion_tokens is None for o in answered):
        out.append("usage")
    if any(o.cached_tokens is None for o in answered):
        out.append("cached_tokens")
    return out


def latency_stats(outcomes: list[CallOutcome]) -> dict[str, float | None]:
    """P50/P99 of TTFT, TPOT and end-to-end latency over answered calls."""
    done = [o for o in outcomes if o.finished is not None and o.error is None]
    ttft = [o.first_token - o.sent for o in done if o.first_token is not None]
    e2e = [o.finished - o.sent for o in done if o.finished is not None]
    tpot = [(o.finished - o.first_token) / (n - 1) for o in done
            if o.finished is not None and o.first_token is not None and (n := o.completion_tokens or 0) > 1]
    out: dict[str, float | None] = {}
    for name, xs in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
        for q in (50, 99):
            v = percentile(xs, q)
            out[f"{name}_p{q}_s"] = None if math.isnan(v) else round(v, 6)
    return out


def token_track(o: CallOutcome, ttft: float, tpot: float) -> TokenTrack:
    """The call's token times as :mod:`sglang_fair.metrics.slo` reads them: each streamed chunk's
    tokens at its arrival (per-chunk usage counts where the server sends them); a call that failed
    or never produced a token counts as missing its TTFT."""
    track = TokenTrack(o.sent, ttft, tpot)
    if o.error is None or o.error == "cancelled":
        for t, n in o.token_times():
            for _ in range(n):
                track.on_token(t)
    return track


def slo_stats(outcomes: list[CallOutcome], ttft: float, tpot: float, duration: float) -> dict[str, Any]:
    """TTFT/TPOT percentiles (TPOT: max running average per call), attainment and goodput (calls
    meeting both targets per second of arrivals), over every call sent."""
    out = slo_summary((token_track(o, ttft, tpot) for o in outcomes), duration)
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()} | {
        "ttft_target_s": ttft, "tpot_target_s": tpot}


def run_summary(run: LoadRun, fairness: dict[str, Any] | None,
                slo: tuple[float, float] = (2.0, 0.05)) -> dict[str, Any]:
    """``summarize`` of the run, nulls for what was not reported, and the client-side extras."""
    doc = summarize(run.result())
    missing = missing_fields(run.outcomes)
    nulls = NEEDS_USAGE if "usage" in missing else NEEDS_CACHED if "cached_tokens" in missing else ()
    for key in (*nulls, *NOT_VISIBLE):
        doc[key] = None
    if not any(o.first_token is not None for o in run.outcomes):
        doc["cache_hit_rate"] = None  # no prompt was served: a rate of nothing
    for name, c in doc["clients"].items():
        mine = [o for r, o in zip(run.requests, run.outcomes, strict=True) if r.client == name]
        if "usage" in missing:
            c["service"] = None
        if nulls:
            c["actual_service"] = None
        c.update(latency_stats(mine))
        c["errors"] = dict(run.errors.get(name, {}))
        c["calls_not_sent"] = run.not_sent.get(name, 0)
    doc.update(latency_stats(run.outcomes))
    doc["calls_sent"] = len(run.outcomes)
    doc["calls_answered"] = sum(1 for o in run.outcomes if o.finished is not None and o.error is None)
    doc["calls_cut"] = sum(1 for o in run.outcomes if o.error == "cancelled" and o.first_token is not None)
    doc["errors"] = sum(sum(c.values()) for c in run.errors.values())
    doc["missing"] = missing + ([] if fairness is not None else ["fairness"]) + list(NOT_VISIBLE)
    doc["fairness"] = fairness
    doc["slo"] = slo_stats(run.outcomes, *slo, run.duration)
    return doc
