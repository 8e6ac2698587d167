"""``dlpm_light`` (admission/dlpm_light.py): its two changes on hand-built inputs, and [1] Thm 4.1
(plain and weighted) and the counter range of Thm A.1 as properties over the randomized workloads of
the DLPM property tests."""

from __future__ import annotations

from fairness_support import COST, PROPERTY, Run, Verdict, Workload, check_bound, counterexample_found
from hypothesis import given
from theorems import SINGLE, WEIGHTED, dlpm_theorem_4_1, weighted_dlpm_theorem_4_1

from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.admission.dlpm_light import DLPMLight
from support import R, admission_order, arrive, policy, req, run_cluster


# ---- change 1: counters outlive idle periods, refills top up ---------------------------------------
def test_returning_client_keeps_its_counter_where_dlpm_resets_it() -> None:
    for name, expected in (("dlpm", 0.0), ("dlpm_light", 90.0)):
        p = policy(name, quantum=100)
        [r] = arrive(p, R(1, "a", 10))
        p.select([r], SlotBudget(1))
        p.on_finish(r)
        arrive(p, R(2, "a", 10))
        assert p.counter("a") == expected, name


def test_a_debt_is_not_forgiven_by_leaving() -> None:
    p = policy("dlpm_light", quantum=10)
    [r] = arrive(p, R(1, "a", 25))
    p.select([r], SlotBudget(1))  # refill to 10, then charged 25
    p.on_finish(r)
    arrive(p, R(2, "a", 1))
    assert p.counter("a") == -15  # dlpm would restart it at 0


def test_refill_tops_up_idle_clients_and_adds_a_quantum_to_waiting_ones() -> None:
    p = policy("dlpm_light", quantum=10, gold=2.0)
    a, g = arrive(p, R(1, "a", 3), R(2, "gold", 4))
    p.select([a, g], SlotBudget(2))
    p.on_finish(a)
    p.on_finish(g)
    assert (p.counter("a"), p.counter("gold")) == (7, 16)
    [b] = arrive(p, R(3, "b", 14))  # new after the first refill: a full quantum
    assert p.counter("b") == 10
    p.select([b], SlotBudget(1))
    [b2] = arrive(p, R(4, "b", 5))
    p.select([b2], SlotBudget(1))  # b (waiting) is at -4: refill; a and gold have nothing waiting
    assert p.refills == 2
    assert p.counter("b") == -4 + 10 - 5 and p.counter("a") == 10 and p.counter("gold") == 20


def test_new_client_before_any_refill_starts_at_zero() -> None:
    p = policy("dlpm_light", quantum=10)
    arrive(p, R(1, "a", 3))
    assert p.counter("a") == 0 and p.refills == 0


# ---- change 2: light clients first ------------------------------------------------------------------
def flood_and_light() -> tuple[list[R], R]:
    heavy = [R(i, "heavy", 100, cached_len=90, arrival=float(i)) for i in range(8)]
    return heavy, R(99, "light", 20, cached_len=0, arrival=9.0)


def test_light_request_goes_before_a_flood_with_credit() -> None:
    for name, first in (("dlpm", 0), ("dlpm_light", 99)):
        p = policy(name, quantum=1000)
        heavy, light = flood_and_light()
        arrive(p, *heavy, light)
        admitted = p.select([*heavy, light], SlotBudget(1))
        assert [r.rid for r in admitted] == [first], name


def test_light_client_without_credit_still_waits() -> None:
    p = policy("dlpm_light", quantum=30)
    heavy, light = flood_and_light()
    [warm] = arrive(p, R(50, "light", 40))
    p.select([warm], SlotBudget(1))  # refill to 30, charged 40: light owes 10
    p.on_finish(warm)
    arrive(p, *heavy, light)
    assert [r.rid for r in p.select([*heavy, light], SlotBudget(1))] == [0]  # heavy has credit
    assert p.counter("light") == -10


def test_clients_of_comparable_load_keep_the_lpm_order() -> None:
    p = policy("dlpm_light", quantum=1000)
    waiting = arrive(p, *[R(i, "ab"[i % 2], 50, cached_len=i, arrival=float(i)) for i in range(6)])
    assert isinstance(p, DLPMLight) and p.light_clients() == set()
    assert [r.rid for r in p.select(waiting, SlotBudget(6))] == [5, 4, 3, 2, 1, 0]


def test_fig2_light_client_is_served_before_the_heavy_run_on_the_step_loop() -> None:
    def requests() -> list:  # type: ignore[type-arg]
        prefix = list(range(100, 164))
        heavy = [req(i, "heavy", prefix + [1000 + i] * 4, output_len=2) for i in range(8)]
        return [*heavy, req(100, "light", [2000 + j for j in range(68)], output_len=2, arrival=1)]

    orders = {}
    for name in ("dlpm", "dlpm_light"):
        cluster, _ = run_cluster(requests(), policy=name, capacity=600, max_running=1, quantum=200.0)
        orders[name] = admission_order(cluster)
    assert orders["dlpm_light"].index("light") == 1  # right after the request running when it came
    assert orders["dlpm"].index("light") > 2  # behind heavy's run of credit


# ---- [1] Thm 4.1, as a property (the checks and generators of test_fairness_properties) ----------
# Their negative control, the same check finding an LPM run that breaks the bound, is
# test_fairness_properties.py::test_theorem_4_1_check_catches_lpm (and the weighted one).
def test_dlpm_light_backlogged_service_difference_within_theorem_4_1() -> None:
    check_bound(dlpm_theorem_4_1("dlpm_light"), SINGLE).require_mostly_exposed()


def test_weighted_dlpm_light_service_per_weight_within_theorem_4_1() -> None:
    check_bound(weighted_dlpm_theorem_4_1("dlpm_light"), WEIGHTED).require_mostly_exposed()


def timed_theorem_4_1(policy: str) -> Run:
    """Thm 4.1 with a quantum in time: ``dlpm_light`` at Q^u = w.quantum / 16 steps of the worker's
    measured service (the lock-step clock counts steps) keeps backlogged clients within 2 (U + Q^u_max),
    Q^u_max the largest quantum one of its refills gave; ``policy`` is judged by that bound."""
    def run(w: Workload) -> Verdict:
        seconds = w.quantum / 16  # 1/16 to 4 steps of service
        cluster, rec = run_cluster(w.requests, policy="dlpm_light", capacity=w.capacity, quantum=0.0,
                                   quantum_s=seconds)
        q_max = max(getattr(worker.policy, "largest_quantum", 0.0) for worker in cluster.workers)
        if policy != "dlpm_light":
            _, rec = run_cluster(w.requests, policy=policy, capacity=w.capacity, quantum=0.0)
        bound = 2 * (w.u(COST) + q_max)
        return Verdict.of(rec, lambda f, g: bound)
    return run


def test_dlpm_light_with_a_quantum_in_time_within_theorem_4_1() -> None:
    check_bound(timed_theorem_4_1("dlpm_light"), SINGLE).require_mostly_exposed()


def test_timed_theorem_4_1_check_catches_lpm() -> None:
    assert counterexample_found(timed_theorem_4_1("lpm"), SINGLE)


@PROPERTY
@given(SINGLE)
def test_dlpm_light_counters_stay_in_the_lemma_range(w: Workload) -> None:
    cluster, _ = run_cluster(w.requests, policy="dlpm_light", capacity=w.capacity, quantum=w.quantum)
    p = cluster.workers[0].policy
    assert isinstance(p, DLPMLight)
    for client, q in p.deficits.items():
        assert -w.u(COST) < q <= w.quantum * p.cost.weight(client)  # [1] Thm A.1, (1) and (2)
