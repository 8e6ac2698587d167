"""Each batch-formation policy's defining behaviour, on hand-built steps."""

from __future__ import annotations

import math

import pytest
from batching_support import AZURE, dec, policy, pre

from sglang_fair.batching import SLO, BatchingConfig, BatchPlan, StepView, check_plan, make_batching_policy
from sglang_fair.batching.slo import SLOTable
from sglang_fair.batching.stepmodel import OnlineStepModel
from sglang_fair.core.errors import ConfigError


def test_sglang_is_prefill_first_and_never_mixes() -> None:
    sg = policy("sglang", token_budget=1000)
    view = StepView(1.0, [dec("d1"), dec("d2")], [pre("p1", 700), pre("p2", 700), pre("p3", 50)])
    plan = sg.plan(view)
    assert plan == BatchPlan(prefills=(("p1", 700), ("p2", 300)))  # chunked to the chunk size
    assert plan.kind == "prefill"
    assert sg.plan(StepView(1.0, [dec("d1"), dec("d2")])) == BatchPlan(decodes=("d1", "d2"))
    assert policy("sglang").token_budget == 8192


def test_sarathi_runs_every_decode_then_fills_the_budget() -> None:
    sa = policy("sarathi", token_budget=100)
    view = StepView(1.0, [dec(f"d{i}") for i in range(30)], [pre("p1", 50), pre("p2", 50)])
    plan = sa.plan(view)
    assert len(plan.decodes) == 30 and plan.prefills == (("p1", 50), ("p2", 20))
    assert plan.tokens == 100
    crowded = StepView(1.0, [dec(f"d{i}") for i in range(120)], [pre("p1", 50)])
    assert len(sa.plan(crowded).decodes) == 120 and not sa.plan(crowded).prefills  # never stalls


def test_fairbatching_time_budget_is_min_slack_but_at_least_min_tpot() -> None:
    fb = policy("fairbatching", time_safety=1.0)
    a = dec("a", tokens=5, arrival=0.0, first=0.5)  # next token due 0.5 + 5 * 0.05 = 0.75
    b = dec("b", tokens=1, arrival=0.5, first=1.0)  # due 1.05
    assert fb.time_budget(StepView(0.2, [a, b])) == pytest.approx(0.55)
    assert fb.time_budget(StepView(0.74, [a, b])) == pytest.approx(0.05)  # at least the min TPOT
    assert fb.time_budget(StepView(0.0, [], [pre("p", 10)])) == math.inf
    literal = policy("fairbatching", envelope="arrival", time_safety=1.0)  # arrival + TTFT + k * TPOT
    assert policy("fairbatching").time_budget(StepView(0.74, [a, b])) == pytest.approx(0.95 * 0.05)
    assert literal.time_budget(StepView(1.0, [a, b])) == pytest.approx(1.25)  # a: due 2.25


def test_fairbatching_puts_an_urgent_decode_before_a_prefill_and_defers_one_with_slack() -> None:
    fb = policy("fairbatching", step_fixed=0.01, step_per_token=1e-4, step_per_context=0.0, time_safety=1.0)
    now = 3.0
    urgent = dec("urgent", tokens=21, first=2.0, context=500)  # due 2 + 21 * 0.05 = 3.05: slack 0.05
    relaxed = dec("relaxed", tokens=40, first=2.0, context=500)  # due 4.0: slack 1.0
    view = StepView(now, [relaxed, urgent], [pre("p", 100_000, arrival=2.9)])
    plan = fb.plan(view)
    check_plan(view, plan)
    assert plan.decodes == ("urgent",)  # the relaxed decode gave its time to the prefill
    # T = max(0.05, 0.05) = 0.05 s; the urgent decode costs 0.0101 s; the chunk fills the rest
    (rid, chunk), = plan.prefills
    assert rid == "p" and chunk == round((0.05 - 0.01 - 1e-4) / 1e-4)
    # without a prefill waiting, there is room for everyone: all decodes run
    assert set(fb.plan(StepView(now, [relaxed, urgent])).decodes) == {"urgent", "relaxed"}


def test_fairbatching_serves_prefills_by_slack() -> None:
    fb = policy("fairbatching", step_fixed=0.01, step_per_token=1e-4, step_per_context=0.0)
    late = pre("late", 300, arrival=0.0)  # due 2.0
    early = pre("early", 300, arrival=1.0)  # due 3.0
    view = StepView(1.5, [dec("d", tokens=1, arrival=1.2, context=10)], [early, late])
    plan = fb.plan(view)
    assert plan.prefills[0][0] == "late"


def test_fairbatching_recalibrates_its_step_model_online() -> None:
    fb = policy("fairbatching", step_fixed=0.01, step_per_token=1e-4, step_per_context=0.0)
    view = StepView(3.0, [dec("urgent", tokens=21, context=500)], [pre("p", 100_000, arrival=2.9)])
    before = fb.plan(view).prefills[0][1]
    for new in (100, 200, 400, 800) * 20:  # the real GPU is twice as slow as the prior says
        fb.on_step(new, 1000, 2 * (0.01 + 1e-4 * new))
    after = fb.plan(view).prefills[0][1]
    assert after < 0.6 * before
    model = OnlineStepModel((0.01, 0.0, 1e-4), window=8)
    for new in (100, 300) * 8:
        model.observe(0, new, 0.03 + 2e-4 * new)
    assert model.predict(0, 500) == pytest.approx(0.03 + 2e-4 * 500, rel=0.05)


def test_slai_runs_critical_decodes_first_and_defers_the_rest() -> None:
    sl = policy("slai", token_budget=64, offset=0.0, offset_high=0.0)
    paying, free = SLO(2.0, 0.1), SLO(2.0, 0.5)
    critical = dec("paying", last=0.9, slo=paying)  # C = 1.0
    relaxed = dec("free", last=0.9, slo=free)  # C = 1.4
    view = StepView(1.0, [relaxed, critical], [pre("p", 1000)])
    plan = sl.plan(view)
    assert plan.decodes == ("paying",) and plan.prefills == (("p", 63),)
    assert sl.plan(StepView(1.0, [relaxed, critical], [pre("p", 10)])).decodes == ("paying", "free")


def test_slai_offset_grows_with_memory_and_mean_batch_time() -> None:
    sl = policy("slai", token_budget=64, offset=1.0, offset_high=5.0, memory_threshold=0.9)
    for _ in range(4):
        sl.on_step(10, 10, 0.05)
    d = dec("d", last=0.0, slo=SLO(2.0, 0.5))  # C = 0.5 - delta * 0.05
    waiting = [pre("p", 1000)]
    assert sl.plan(StepView(0.3, [d], waiting, kv_used=10, kv_capacity=100)).decodes == ()  # C = 0.45
    assert sl.plan(StepView(0.3, [d], waiting, kv_used=95, kv_capacity=100)).decodes == ("d",)  # C = 0.25


def test_slai_orders_prefills_spf_or_fcfs_started_first_within_caps() -> None:
    ps = [pre("long", 500, arrival=0.0), pre("short", 10, arrival=1.0), pre("mid", 100, arrival=0.5)]
    spf = policy("slai", token_budget=2000).plan(StepView(2.0, [], ps))
    assert [r for r, _ in spf.prefills] == ["short", "mid", "long"]
    fcfs = policy("slai", token_budget=2000, prefill_order="fcfs").plan(StepView(2.0, [], ps))
    assert [r for r, _ in fcfs.prefills] == ["long", "mid", "short"]
    going = [*ps, pre("going", 700, arrival=1.5, done=300, started=True)]
    assert policy("slai").plan(StepView(2.0, [], going)).prefills[0] == ("going", 512)
    capped = policy("slai", token_budget=2000, max_active=2).plan(StepView(2.0, [dec("d")], going))
    assert [r for r, _ in capped.prefills] == ["going"]  # d + going = 2 active: no new prefill starts
    limited = policy("slai", token_budget=2000, decode_limit=3).plan(
        StepView(2.0, [dec(f"d{i}") for i in range(10)]))
    assert len(limited.decodes) == 3


def test_check_plan_rejects_bad_plans() -> None:
    view = StepView(0.0, [dec("d")], [pre("p", 10)])
    for bad in (BatchPlan(decodes=("d", "d")), BatchPlan(decodes=("x",)), BatchPlan(prefills=(("p", 11),)),
                BatchPlan(prefills=(("p", 0),)), BatchPlan(prefills=(("p", 5), ("p", 5)))):
        with pytest.raises(ConfigError):
            check_plan(view, bad)
    check_plan(StepView(0.0, [], [pre("cached", 0, done=40)]), BatchPlan(prefills=(("cached", 0),)))


def test_slo_classes_per_client_and_config_errors() -> None:
    table = BatchingConfig(slo_classes="paying=0.5/0.1,free=2/0.5", client_classes="a=paying,b=free",
                           ttft=1.0, tpot=0.2).slo_table()
    assert table.for_client("a") == SLO(0.5, 0.1) and table.for_client("b") == SLO(2.0, 0.5)
    assert table.for_client("c") == SLO(1.0, 0.2) and table.class_of("c") == "default"
    assert SLOTable.parse(AZURE, "", "").for_client("x") == AZURE
    for bad in ({"slo_classes": "paying=0.5"}, {"client_classes": "a=gold"}, {"slo_classes": "x=a/b"},
                {"token_budget": -1}, {"prefill_order": "lifo"}, {"ttft": 0.0}):
        with pytest.raises(ConfigError):
            BatchingConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="known: fairbatching, sarathi, sglang, slai"):
        make_batching_policy(BatchingConfig(policy="nope"))
