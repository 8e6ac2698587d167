"""Each SGLang worker's prefill admission budget report (``pab_report.py``), with a fake scheduler
and clock (no server): the figure is the simulator's formula over what the scheduler holds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_chunk_sizer import CONFIG, Batch, Clock, Mode, Req, Scheduler, budget_with

from sglang_fair.batching import DecodeView, PrefillView, StepView
from sglang_fair.batching.pab import prefill_admission_budget
from sglang_fair.batching.slo import SLO
from sglang_fair.sglang_plugin import pab_report, scheduler_hooks, worker_hooks
from sglang_fair.sglang_plugin.chunk_sizer import ChunkSizer
from sglang_fair.sglang_plugin.config import ENV_CONFIG
from sglang_fair.sglang_plugin.pab_report import BudgetReporter

# CONFIG's prior: 10 ms a step + 0.1 ms a new token; TTFT 2 s, TPOT 50 ms
WINDOW = 2.0 - 40 * 0.01  # 40 TPOT windows in the TTFT window, each paying the fixed cost


def held(clock: Clock) -> tuple[Scheduler, ChunkSizer]:
    running = [Req(f"r{i}", list(range(100)), list(range(10))) for i in range(2)]
    waiting = [Req("w0", list(range(1000))), Req("w1", list(range(1000)))]
    chunked = Req("p", list(range(5000)), prefix_len=1000)
    return (Scheduler(running_batch=Batch(running), chunked_req=chunked, waiting_queue=waiting),
            budget_with(clock, running, 0.1))


def test_the_report_is_the_budget_over_running_chunked_and_waiting_requests() -> None:
    clock = Clock()
    scheduler, budget = held(clock)
    value = BudgetReporter(budget, own=False, every=0.1, clock=clock).report(scheduler)
    decodes = 2 * 40 * 1e-4  # each running request decodes 40 tokens in the window
    assert value == int((WINDOW - decodes) / 1e-4) - 4000 - 2000  # minus the chunk left and the queue
    slo = SLO(2.0, 0.05)  # the same function over a hand-built view gives the same figure
    view = StepView(clock.t, [DecodeView(f"r{i}", 0, 0, 10, 0, 110, slo) for i in range(2)],
                    [PrefillView("p", 0, 5000, 1000, slo)])
    assert value == int(prefill_admission_budget(view, 2.0, (0.01, 0.0, 1e-4), queued_tokens=2000))


def test_more_waiting_work_lowers_the_report_token_for_token() -> None:
    clock = Clock()
    scheduler, budget = held(clock)
    reporter = BudgetReporter(budget, own=False, every=0.0, clock=clock)
    before = reporter.report(scheduler)
    scheduler.waiting_queue.append(Req("w2", list(range(777))))
    assert reporter.report(scheduler) == before - 777


def test_reports_are_rate_limited_and_an_own_model_learns() -> None:
    clock = Clock()
    scheduler, _ = held(clock)
    reporter = pab_report.make_reporter(CONFIG, None, every=0.25)
    reporter.clock = reporter.budget.clock = clock
    batch = Batch(list(scheduler.running_batch.reqs), launch_ts=clock.t, forward_mode=Mode(False))
    clock.t += 0.02
    assert reporter.after_step(scheduler, batch) is not None
    assert reporter.after_step(scheduler, batch) is None  # within 0.25 s of the last
    clock.t += 0.3
    assert reporter.after_step(scheduler, batch) is not None
    assert reporter.own and reporter.budget.steps == 3
    sizer = ChunkSizer(CONFIG, clock)
    assert pab_report.make_reporter(CONFIG, sizer, 0.25).budget is sizer  # the chunk sizer's model


@pytest.fixture
def link(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    fake = SimpleNamespace(link=SimpleNamespace(prefill_budget=True, heartbeat_interval=0.5),
                           prefill_budget=None, routed=set())
    monkeypatch.setattr(worker_hooks, "_LINK", fake)
    monkeypatch.setenv(ENV_CONFIG, '{"batch_ttft": 1.0}')
    return fake


def test_the_batch_result_hook_puts_the_report_on_the_worker_link(link: SimpleNamespace) -> None:
    scheduler = Scheduler(waiting_queue=[Req("w", list(range(300)))])
    scheduler_hooks.process_batch_result(None, scheduler, Batch([]), None)
    reporter = getattr(scheduler, pab_report.REPORTER_ATTR)
    fixed, _, per_token = reporter.budget.policy.model.coefficients  # the default prior
    assert fixed > 0 and per_token > 0 and reporter.budget.slos.default.ttft == 1.0
    # an idle worker: one fixed step in the TTFT window, the rest prefill, minus the waiting prompt
    assert link.prefill_budget == int((1.0 - fixed) / per_token) - 300


def test_no_report_unless_the_router_asks(link: SimpleNamespace) -> None:
    link.link.prefill_budget = False
    scheduler = Scheduler()
    scheduler_hooks.process_batch_result(None, scheduler, Batch([]), None)
    assert link.prefill_budget is None and not hasattr(scheduler, pab_report.REPORTER_ATTR)
