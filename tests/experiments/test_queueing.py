"""Queue figures of a run (experiments/queueing.py): mean wait for admission and mean decode batch."""

from __future__ import annotations

import pytest

from sglang_fair.admission import AdmissionConfig
from sglang_fair.core.errors import ConfigError
from sglang_fair.experiments.protocol import Protocol, queue_figures
from sglang_fair.experiments.queueing import mean_decode_batch, mean_wait
from sglang_fair.metrics import RequestRecord
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig


def _req(rid: int, arrival: float, admitted: float) -> RequestRecord:
    return RequestRecord(rid, rid, "a", arrival, 10, 10, worker=0, admitted=admitted)


def test_mean_wait_counts_the_window_and_censors_at_the_end() -> None:
    reqs = [_req(0, 1.0, 1.5), _req(1, 2.0, 5.0), _req(2, 3.0, -1.0), _req(3, 9.0, 9.0)]
    assert mean_wait(reqs, 2.0, 8.0, end=10.0) == pytest.approx((3.0 + 7.0) / 2)  # rid 2 waits until 10
    assert mean_wait(reqs, 0.0, 2.0, end=10.0) == pytest.approx(0.5)
    assert mean_wait(reqs, 4.0, 8.0, end=10.0) is None
    with pytest.raises(ConfigError):
        mean_wait(reqs, 3.0, 3.0, end=10.0)


def test_mean_decode_batch_weighs_plans_by_steps() -> None:
    plans = [(0.5, 100, 1), (1.0, 2, 3), (2.0, 6, 1), (9.0, 50, 4)]
    assert mean_decode_batch(plans, 1.0, 5.0) == pytest.approx((2 * 3 + 6) / 4)
    assert mean_decode_batch(plans, 0.0, 10.0) == pytest.approx((100 + 6 + 6 + 200) / 9)
    assert mean_decode_batch(plans, 3.0, 5.0) is None


def _run(kv_tokens: int) -> dict[str, float | None]:
    wl = WorkloadConfig(workload="tot", scenario="s1", clients=4, rate=0.05, duration=60, seed=0,
                        synthetic_data=True)
    engine = EngineConfig(preset="a10-llama8b", kv_tokens=kv_tokens)
    spec = RunSpec(wl, ClusterSimConfig(max_time=60.0), engine, AdmissionConfig(policy="lpm"))
    res = Simulator(spec).run()
    assert res.decode_plans and all(n >= 1 and k >= 1 for _, n, k in res.decode_plans)
    return queue_figures(res, Protocol(duration=60.0, warmup=10.0, cooldown=10.0))


def test_a_small_pool_makes_calls_wait_and_bounds_the_batch() -> None:
    small, big = _run(4_000), _run(400_000)
    assert small["mean_wait_s"] is not None and big["mean_wait_s"] is not None
    assert small["mean_decode_batch"] is not None and big["mean_decode_batch"] is not None
    assert small["mean_wait_s"] > 10 * max(big["mean_wait_s"], 0.1)
    assert small["mean_decode_batch"] < big["mean_decode_batch"]
