"""FairBatching's prefill admission budget ([3] App. A) and the router that routes by it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from batching_support import dec, long_prompts, policy, pre

from sglang_fair.admission import AdmissionConfig
from sglang_fair.batching import SLO, BatchingConfig, StepView
from sglang_fair.batching.pab import prefill_admission_budget
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair.sim.config import ClusterSimConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec

COEF = (0.01, 1e-6, 1e-4)  # fixed, per KV token, per new token (seconds)


def test_budget_of_an_idle_worker_is_the_ttft_window_of_prefill() -> None:
    assert prefill_admission_budget(StepView(0.0), 2.0, COEF) == pytest.approx((2.0 - 0.01) / 1e-4)


def test_budget_reserves_decode_steps_and_subtracts_pending_prefill() -> None:
    d = dec("d", context=1000, slo=SLO(2.0, 0.05))
    view = StepView(0.0, [d], [pre("p", 3000)])
    # 40 steps of the urgent decode pay the fixed cost; d decodes 40 tokens reading 1000 KV tokens each
    left = 2.0 - 40 * 0.01 - 40 * (1e-6 * 1000 + 1e-4)
    assert prefill_admission_budget(view, 2.0, COEF, queued_tokens=500) == pytest.approx(
        left / 1e-4 - 3000 - 500)
    more = StepView(0.0, [d, dec("e", context=5000)], [pre("p", 3000)])
    assert prefill_admission_budget(more, 2.0, COEF) < prefill_admission_budget(view, 2.0, COEF)
    assert policy("fairbatching").prefill_budget(view, 0) is not None
    assert policy("sarathi").prefill_budget(view, 0) is None


@dataclass
class Q:
    rid: int
    client: str
    tokens: list[int] = field(default_factory=list)


def test_pab_router_sends_to_a_worker_with_budget_and_charges_it() -> None:
    r = make_routing_policy(RouterConfig(policy="pab", num_workers=3))
    assert r.route(Q(0, "a", [1] * 10)) == 0  # nobody reported: all unbounded, lowest index
    for w, b in enumerate((500.0, 3000.0, 2000.0)):
        r.on_prefill_budget(w, b)
    assert r.route(Q(1, "a", [1] * 1000)) == 1  # largest budget that covers it
    assert r.route(Q(2, "a", [1] * 1500)) == 2  # 1 has 2000 left, 2 has 2000: tie -> shorter queue
    assert r.route(Q(3, "a", [1] * 4000)) == 1  # nobody covers it: the largest budget
    assert r.budget == [500.0, -2000.0, 500.0]
    r.mark_dead(2)
    assert r.route(Q(4, "a", [1] * 100)) == 0


def test_fairbatching_workers_report_their_budget_to_a_pab_router_in_the_simulator() -> None:
    spec = RunSpec(None, ClusterSimConfig(dp=2), admission=AdmissionConfig(policy="fcfs"),
                   routing=RouterConfig(policy="pab"), batching=BatchingConfig(policy="fairbatching"))
    sim = Simulator(spec, long_prompts(30))
    res = sim.run()
    assert all(r.generated == r.output_len for r in res.requests)
    budget = getattr(sim.router, "budget")  # noqa: B009
    assert all(math.isfinite(b) for b in budget)
    assert {r.worker for r in res.requests} == {0, 1}


def test_a_calls_own_slo_reaches_the_batching_policy_and_the_metrics() -> None:
    """Half the requests carry their own tight TPOT (Call.slo -> EngineRequest.slo): FairBatching
    serves them faster than the rest, and the recorder judges them by their own target. Negative
    control: the same run without per-request targets treats both halves alike."""
    import dataclasses
    import statistics

    def run(own: bool) -> dict[int, Any]:
        tight = (None, 0.012)
        programs = [dataclasses.replace(p, calls=tuple(dataclasses.replace(c, slo=tight) for c in p.calls))
                    if own and p.pid % 2 else p for p in long_prompts(30, gap=0.1)]
        spec = RunSpec(admission=AdmissionConfig(policy="fcfs"),
                       batching=BatchingConfig(policy="fairbatching", tpot=0.2), slo=True)
        sim = Simulator(spec, programs)
        sim.run()
        assert sim.slo is not None
        return sim.slo.tracks

    def gap(tracks: dict[int, Any]) -> float:
        odd = statistics.median(t.max_tpot for r, t in tracks.items() if r % 2)
        even = statistics.median(t.max_tpot for r, t in tracks.items() if not r % 2)
        return odd / even

    tracks = run(own=True)
    assert {t.tpot_slo for r, t in tracks.items() if r % 2} == {0.012}
    assert {t.tpot_slo for r, t in tracks.items() if not r % 2} == {0.2}
    assert gap(tracks) < 0.8 * gap(run(own=False)), (gap(tracks), gap(run(own=False)))
