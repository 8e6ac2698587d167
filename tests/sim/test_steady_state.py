"""The steady-state protocol (metrics/steady.py): metrics over [warmup, end of arrivals] only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fair.core.errors import ConfigError
from sglang_fair.metrics import (
    MetricsConfig,
    ProgramRecord,
    RequestRecord,
    RunResult,
    ServiceLedger,
    latency_window,
    metrics_window,
    summarize,
)


def _run() -> RunResult:
    """Two clients, 20 s: both get 100 per second while arrivals last (0-10 s); in the drain
    (10-20 s) only client a, whose last program is long, gets 300 per second. Programs (one call
    each): b's at 1 s (before a 2 s warmup) takes 0.5 s; a's at 5 s finishes at 20 s; b's at 8 s
    never finishes (censored at the end); a's at 12 s (after the arrivals' end, 10 s) takes 1 s."""
    led = ServiceLedger(window=1.0)
    for t in range(10):
        led.book(t + 0.5, "a", input_tokens=100, extend_tokens=100)  # w_e = 1: service 100
        led.book(t + 0.5, "b", input_tokens=100, extend_tokens=100)
    for t in range(10, 20):
        led.book(t + 0.5, "a", input_tokens=300, extend_tokens=300)
    reqs = [
        RequestRecord(0, 0, "b", 1.0, 100, 10, worker=0, admitted=1.0, finished=1.5, cached_len=100),
        RequestRecord(1, 1, "a", 5.0, 100, 10, worker=0, admitted=5.0, finished=20.0, cached_len=50),
        RequestRecord(2, 2, "b", 8.0, 100, 10, worker=0, admitted=8.0, cached_len=0),
        RequestRecord(3, 3, "a", 12.0, 100, 10, worker=0, admitted=12.0, finished=13.0, cached_len=100),
    ]
    progs = [
        ProgramRecord(0, "b", 1.0, 1, False, "e2e", finished=1.5),
        ProgramRecord(1, "a", 5.0, 1, False, "e2e", finished=20.0),
        ProgramRecord(2, "b", 8.0, 1, False, "e2e"),
        ProgramRecord(3, "a", 12.0, 1, False, "e2e", finished=13.0),
    ]
    return RunResult(reqs, progs, led, end_time=20.0, workers=1)


def test_whole_run_is_the_default_and_includes_the_drain() -> None:
    s = summarize(_run())
    assert "metrics_window_s" not in s
    assert s["throughput"] == pytest.approx((2000 + 3000) / 20)
    assert s["jain_index"] < 0.9  # the drain: only a is served
    assert s["well_behaved_p50_s"] == pytest.approx(percentile_of([0.5, 15.0, 1.0]))


def percentile_of(xs: list[float]) -> float:
    from sglang_fair.metrics import percentile

    return percentile(xs, 50)


def test_steady_state_window_leaves_out_warmup_and_drain() -> None:
    window = metrics_window(MetricsConfig(warmup=2.0, steady_state=True), duration=10.0, end=20.0)
    assert window == (2.0, 10.0)
    s = summarize(_run(), window)
    assert s["metrics_window_s"] == [2.0, 10.0]
    assert s["throughput"] == pytest.approx(200.0)  # 8 whole seconds of 2 x 100
    assert s["jain_index"] == pytest.approx(1.0)  # equal service while both are active
    assert s["cache_hit_rate"] == pytest.approx(50 / 200)  # requests 1 and 2 admitted in [2, 10)
    # programs 1 (15 s) and 2 (unfinished: at least 20 - 8 = 12 s) arrived in the window
    assert s["well_behaved_p50_s"] == pytest.approx(13.5) and s["latency_censored"] == 1
    assert s["clients"]["a"]["service"] == pytest.approx(800.0)
    assert s["clients"]["b"]["p50_s"] == pytest.approx(12.0)


def test_cooldown_leaves_the_last_arrivals_out_of_the_latency_only() -> None:
    config = MetricsConfig(warmup=2.0, steady_state=True, cooldown=3.0)
    window = metrics_window(config, duration=10.0, end=20.0)
    assert latency_window(config, window) == (2.0, 7.0)
    s = summarize(_run(), window, latency_window(config, window))
    assert s["well_behaved_p50_s"] == pytest.approx(15.0)  # only a's program at 5 s
    assert s["latency_censored"] == 0 and s["latency_arrivals_s"] == [2.0, 7.0]
    assert s["throughput"] == pytest.approx(200.0) and s["jain_index"] == pytest.approx(1.0)  # unchanged
    assert latency_window(MetricsConfig(), None) is None
    with pytest.raises(ConfigError, match="cooldown"):
        latency_window(MetricsConfig(cooldown=8.0), (2.0, 10.0))


def test_warmup_alone_keeps_the_drain() -> None:
    window = metrics_window(MetricsConfig(warmup=2.0), duration=10.0, end=20.0)
    assert window == (2.0, 20.0)
    s = summarize(_run(), window)
    assert s["throughput"] == pytest.approx((1600 + 3000) / 18, abs=1e-3)
    # all active in [5, 20] (b's last program never finishes): a 3,500 vs b 500, the drain counts
    assert s["jain_index"] == pytest.approx(4000**2 / (2 * (3500**2 + 500**2)), abs=1e-4)
    assert summarize(_run(), (0.0, 20.0))["throughput"] == pytest.approx(summarize(_run())["throughput"])


def test_backlogged_difference_is_taken_inside_the_window() -> None:
    run = _run()
    # b waits (arrived, not admitted) during 10-20 s as a receives 300/s: a large difference...
    run.requests.append(RequestRecord(4, 4, "b", 10.0, 100, 10))
    run.requests.append(RequestRecord(5, 5, "a", 10.0, 100, 10))
    assert summarize(run)["max_backlogged_service_diff"] == pytest.approx(3000.0)
    # ...which a window ending at the last arrival does not see.
    assert summarize(run, (2.0, 10.0))["max_backlogged_service_diff"] == 0.0
    assert summarize(run, (2.0, 15.0))["max_backlogged_service_diff"] == pytest.approx(1500.0)


def test_window_validation() -> None:
    assert metrics_window(MetricsConfig(), 10.0, 20.0) is None
    with pytest.raises(ConfigError, match="no steady-state window"):
        metrics_window(MetricsConfig(warmup=10.0, steady_state=True), 10.0, 20.0)
    with pytest.raises(ConfigError, match="warmup"):
        MetricsConfig(warmup=-1)
    with pytest.raises(ConfigError, match="cooldown"):
        MetricsConfig(cooldown=-1)


def test_sim_cli_applies_the_window_and_stops_at_the_end_of_arrivals(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    cmd = [sys.executable, "-m", "sglang_fair", "sim", "--workload", "tot", "--clients", "2", "--dp", "1",
           "--duration", "12", "--rate", "0.2", "--depth", "2", "--synthetic-data",
           "--warmup", "3", "--steady-state", "--json", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    doc = json.loads(out.read_text())
    assert doc["metrics_window_s"][0] == 3.0 and doc["metrics_window_s"][1] <= 12.0
    assert doc["makespan_s"] <= 12.0 + 1e-6  # the drain is not simulated
    assert doc["config"]["metrics"] == {"warmup": 3.0, "steady_state": True, "cooldown": 0.0}
