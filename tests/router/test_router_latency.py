"""The router's own latency instrumentation (Submit received -> Dispatch sent) and the router bench."""

from __future__ import annotations

import random
import threading
import time

import pytest
import zmq

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.harness.server import free_ports
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router.codec import encode
from sglang_fair_router.config import ServiceConfig
from sglang_fair_router.fake_worker import FakeWorker
from sglang_fair_router.http import prometheus_text
from sglang_fair_router.service import LatencyHistogram, RouterService
from sglang_fair_router.speed import BenchRouterConfig, run

pytestmark = pytest.mark.timers


def test_histogram_percentiles_window_and_overflow() -> None:
    h = LatencyHistogram(size=100)
    for us in [1, 2, 2, 3, 50] * 20:  # 100 samples: 20 at 1 us, 40 at 2, 20 at 3, 20 at 50
        h.record(us * 1000 + 400)
    s = h.summary()
    assert s == {"count": 100, "p50": 3.0, "p99": 51.0, "p999": 51.0, "max": 51.0}
    before = h.counts[:]
    h.record(7_000_000)  # 7 ms: past the last 1 us bucket, so the exact max is reported
    s = h.summary(before)
    assert s["count"] == 1 and s["p50"] == 101.0 and s["max"] == 7000.0
    assert LatencyHistogram().summary()["count"] == 0


def test_router_reports_its_own_time_per_dispatch() -> None:
    ep = [f"tcp://127.0.0.1:{port}" for port in free_ports(5)]
    cfg = ServiceConfig(frontend=ep[0], failures=ep[1], feedback=ep[2], workers=",".join(ep[3:]))
    workers = [FakeWorker(i, e, cfg.feedback) for i, e in enumerate(cfg.worker_endpoints())]
    for w in workers:
        w.start()
    service = RouterService(cfg, make_routing_policy(RouterConfig("d2lpm", num_workers=2)))
    thread = threading.Thread(target=service.serve_forever, kwargs={"poll_ms": 10}, daemon=True)
    thread.start()
    front = zmq.Context.instance().socket(zmq.PUSH)
    front.setsockopt(zmq.LINGER, 0)
    front.connect(cfg.frontend)
    try:
        assert service.snapshot["submit_to_dispatch_us"]["count"] == 0
        for i in range(25):
            submit = fm.Submit(f"r{i}", f"c{i % 3}", pack_tokens([i % 3] * 300 + [i]))
            front.send_multipart([encode(submit), b"x"])
        deadline = time.monotonic() + 10
        while service.state.counts["dispatched"] < 25:
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.02)
        stats = service.snapshot["submit_to_dispatch_us"]
        assert stats["count"] == 25
        assert 0 < stats["p50"] <= stats["p99"] <= stats["p999"] <= stats["max"] < 1e6
        text = prometheus_text(lambda: service.snapshot).decode()
        assert f'sglang_fair_router_dispatch_us{{quantile="p99"}} {stats["p99"]}' in text
    finally:
        service.stop()
        thread.join(5)
        for w in workers:
            w.stop()
            w.join(5)
        front.close(0)


def test_bench_runs_end_to_end_and_reports_both_latencies() -> None:
    cfg = BenchRouterConfig(workers=2, clients=4, prompt_len=128, requests=300, rate=1000.0, seconds=0.3,
                            port=random.randrange(30000, 60000), pin="none")
    f = run(cfg)
    assert f["router_dispatch_rate_rps"] > 0 and f["router_offered_rate_rps"] > 0
    assert 0 < f["router_added_latency_ms_p50"] <= f["router_added_latency_ms_p99"]
    assert 0 < f["router_internal_us_p50"] <= f["router_internal_us_p99"] <= f["router_internal_us_max"]
    assert f["router_internal_saturated_us_p50"] > 0
