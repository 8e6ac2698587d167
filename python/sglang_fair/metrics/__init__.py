"""Run metrics: service over time (perceived and actual), Jain's index, latency, cache, load."""

from sglang_fair.metrics.ledger import ProgramRecord, RequestRecord, ServiceLedger
from sglang_fair.metrics.stats import (
    all_active_interval,
    backlog_intervals,
    jain_index,
    max_backlogged_diff,
    percentile,
)
from sglang_fair.metrics.steady import MetricsConfig, latency_window, metrics_window
from sglang_fair.metrics.summary import RunResult, summarize, summarize_windows

__all__ = [
    "MetricsConfig", "ProgramRecord", "RequestRecord", "RunResult", "ServiceLedger", "all_active_interval",
    "backlog_intervals", "jain_index", "latency_window", "max_backlogged_diff", "metrics_window",
    "percentile", "summarize", "summarize_windows",
]
