"""The accounting rule of the SGLang adapter's FairState, with fake requests (no SGLang needed)."""

from __future__ import annotations

import pytest
from plugin_support import FakeReq

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget as FakeBudget
from sglang_fair.core.cost import CostModel
from sglang_fair.sglang_plugin.state import FairState, client_of


def make_state(policy: str = "dlpm", quantum: float = 1000.0) -> FairState:
    config = AdmissionConfig(policy=policy, quantum=quantum, cost=CostModel(w_e=1.0, w_q=2.0))
    return FairState(make_admission_policy(config))


def req(rid: str, client: str | None, n_in: int, cached: int = 0) -> FakeReq:
    return FakeReq(rid, client, list(range(n_in)), prefix_len=cached)


def test_client_from_routing_key_or_default() -> None:
    assert client_of(req("a", "alice", 1)) == "alice"
    assert client_of(req("b", None, 1)) == "default"
    assert client_of(req("c", "", 1)) == "default"


def test_extend_charged_once_at_admission_minus_cached_prefix() -> None:
    state = make_state()
    r = req("r1", "alice", 100, cached=60)
    state.arrive(r)
    assert state.select([r], FakeBudget(4)) == [r]
    assert state.policy.book.service["alice"] == 40.0  # w_e * (100 - 60)
    r.output_ids.append(7)  # the first token, produced by prefill
    state.after_step()
    assert state.policy.book.service["alice"] == 42.0
    assert state.snapshot()["alice"]["perceived_service"] == 102.0  # as if nothing were cached


def test_retracted_request_is_not_charged_twice() -> None:
    state = make_state()
    r = req("r1", "bob", 50)
    state.arrive(r)
    state.select([r], FakeBudget(1))
    r.output_ids.extend([1, 2, 3])
    state.after_step()
    assert state.policy.book.service["bob"] == 50 + 6
    state.arrive(r)  # retracted: back in the waiting queue, output kept
    snap = state.snapshot()["bob"]
    assert (snap["waiting"], snap["running"]) == (1, 0)
    r.prefix_len = 0  # its KV was freed; recomputation is the system's choice
    state.select([r], FakeBudget(1))
    r.output_ids.append(4)
    state.after_step()
    assert state.policy.book.service["bob"] == 50 + 8


def test_finished_and_aborted_requests_leave_and_keep_their_charge() -> None:
    state = make_state()
    a, b = req("a", "c1", 10), req("b", "c1", 10)
    state.arrive(a)
    state.arrive(b)
    state.select([a, b], FakeBudget(1))  # a runs, b waits
    a.output_ids.extend([1, 1])
    a.done = True
    state.after_step()
    state.reconcile([])  # b was aborted while waiting: gone from SGLang's queue
    snap = state.snapshot()["c1"]
    assert (snap["waiting"], snap["running"]) == (0, 0)
    assert snap["service"] == 10 + 4
    assert not state.waiting and not state.running


def test_reconcile_adopts_requests_it_never_saw() -> None:
    state = make_state("vtc")
    r = req("x", "dana", 5)
    state.reconcile([r])
    assert state.snapshot()["dana"]["waiting"] == 1


@pytest.mark.parametrize(("policy", "light_first"), [("dlpm", True), ("vtc", True), ("lpm", False)])
def test_light_client_admitted_before_backlog_of_heavy(policy: str, light_first: bool) -> None:
    state = make_state(policy, quantum=100.0)
    heavy = [req(f"h{i}", "heavy", 200, cached=190) for i in range(20)]
    for r in heavy:
        state.arrive(r)
    running = state.select(heavy, FakeBudget(2))
    for r in running:  # heavy's admitted requests decode: its counter goes negative
        r.output_ids.extend(range(60))
    state.after_step()
    light = req("l", "light", 50)
    state.arrive(light)
    waiting = [r for r in heavy if r.rid in state.waiting] + [light]
    assert (light in state.select(waiting, FakeBudget(2))) is light_first
