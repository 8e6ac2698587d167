"""Bounded per-client memory: idle clients are forgotten after a TTL, and a forgotten
client is exactly a new client (what any client can become by sending another id without keys)."""

from __future__ import annotations

import pytest
from plugin_support import FakeReq

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.core.cost import CostModel
from sglang_fair.edge.config import EdgeConfig
from sglang_fair.edge.keys import parse_key_lines
from sglang_fair.sglang_plugin.config import FairConfig
from sglang_fair.sglang_plugin.state import FairState

TTL = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0  # as right after boot: nothing may depend on the clock having grown

    def __call__(self) -> float:
        return self.now


def fair_state(policy: str, clock: Clock, ttl: float = TTL) -> FairState:
    config = AdmissionConfig(policy=policy, quantum=100.0, cost=CostModel(w_e=1.0, w_q=2.0))
    return FairState(make_admission_policy(config), client_ttl=ttl, clock=clock)


def serve_one(state: FairState, rid: str, client: str, n_in: int = 30, n_out: int = 5) -> None:
    req = FakeReq(rid, client, list(range(n_in)))
    state.arrive(req)
    assert state.select([req], SlotBudget(1)) == [req]
    req.output_ids.extend([1] * n_out)
    req.done = True
    state.after_step()


def counter(state: FairState, client: str) -> float | None:
    return state.policy.snapshot()[client].counter


@pytest.mark.parametrize("policy", ["dlpm", "dlpm_light", "vtc"])
def test_a_forgotten_client_returns_exactly_as_a_new_id_would(policy: str) -> None:
    clock_a, clock_b = Clock(), Clock()
    a, b = fair_state(policy, clock_a), fair_state(policy, clock_b)
    for s, clock in ((a, clock_a), (b, clock_b)):
        serve_one(s, "x0", "x", n_in=80)  # the client that will go idle
        for i in range(6):  # a busy other client (VTC's last admitted: the lift's floor, kept)
            clock.now += 1
            serve_one(s, f"o{i}", "other")
        clock.now = TTL + 3
        s.expire()
    assert "x" not in a.policy.snapshot() and "x" not in a.ledger.tokens
    for s in (a, b):  # both queues hold a waiting request of "other"
        s.arrive(FakeReq("p", "other", [1] * 10))
    a.arrive(FakeReq("x1", "x", [1] * 10))  # x comes back...
    b.arrive(FakeReq("y1", "y", [1] * 10))  # ...where b sees a never-seen id
    assert counter(a, "x") == counter(b, "y")
    assert "other" in a.policy.snapshot()


def test_idle_clients_are_forgotten_and_memory_stays_bounded() -> None:
    clock = Clock()
    s = fair_state("dlpm_light", clock)
    for i in range(2000):  # every request from a fresh id, as a client without keys may do
        serve_one(s, f"r{i}", f"c{i}")
        clock.now += 0.01
    assert len(s.policy.snapshot()) == 2000
    clock.now += TTL + 1
    assert len(s.expire()) == 2000
    assert s.policy.snapshot() == {} and not s.ledger.tokens and not s.idle.last_active
    assert s.policy.deficits == {} and s.forgotten == 2000  # type: ignore[attr-defined]


def test_an_active_client_is_never_forgotten() -> None:
    clock = Clock()
    s = fair_state("dlpm", clock)
    long = FakeReq("long", "busy", [1] * 10)
    s.arrive(long)
    s.select([long], SlotBudget(1))  # runs for longer than the TTL
    clock.now += 3 * TTL
    assert s.expire() == []
    assert s.snapshot()["busy"]["running"] == 1
    long.done = True
    s.after_step()
    clock.now += TTL + 1
    assert s.expire() == ["busy"]


def test_vtc_keeps_the_client_whose_counter_is_the_floor() -> None:
    clock = Clock()
    s = fair_state("vtc", clock)
    req = FakeReq("q", "left", [1] * 10)
    s.arrive(req)
    s.reconcile([])  # dropped while waiting: VTC's last_left, the floor of the next lift
    clock.now += TTL + 1
    assert s.expire() == []


def test_no_expiry_with_keys_or_a_zero_ttl() -> None:
    keys = parse_key_lines(["k1 alice"])
    assert FairConfig(edge=EdgeConfig(key_table=keys)).edge.idle_ttl() == 0.0
    assert FairConfig().edge.idle_ttl() == 600.0
    clock = Clock()
    s = fair_state("dlpm", clock, ttl=0.0)
    serve_one(s, "r", "c")
    clock.now += 10 * TTL
    assert s.expire() == [] and "c" in s.policy.snapshot()


def test_prometheus_label_sets_are_bounded() -> None:
    pytest.importorskip("prometheus_client")
    from prometheus_client import REGISTRY

    from sglang_fair.sglang_plugin.client_gauges import OTHER, ClientGauges

    gauges = ClientGauges(dp_rank=7, max_clients=2)

    def value(client: str) -> float | None:
        return REGISTRY.get_sample_value("sglang_fair:service", {"client": client, "dp_rank": "7"})

    gauges.update({c: {"service": float(i)} for i, c in enumerate("abcd", start=1)})
    assert (value("a"), value("b"), value(OTHER), value("c")) == (1.0, 2.0, 7.0, None)
    gauges.update({"b": {"service": 5.0}, "e": {"service": 1.0}})  # a expired, c and d too
    assert (value("a"), value("b"), value(OTHER)) == (0.0, 5.0, 1.0)
    labels = {s.labels["client"] for m in REGISTRY.collect() if m.name == "sglang_fair:service"
              for s in m.samples if s.labels.get("dp_rank") == "7"}
    assert labels == {"a", "b", OTHER}
