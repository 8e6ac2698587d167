"""The papers' fairness bounds as properties over randomized workloads, driven by the step loop.

U = w_e * L_input + w_q * M, with L_input the longest prompt and M the KV pool of a worker. Each
bound test (theorem number in its name) also requires that most of its examples exposed the bound
(see fairness_support), and has a negative control: the same test, generator and example budget
with the unfair baseline in place of the fair policy finds a counterexample.
"""

from __future__ import annotations

import pytest
from fairness_support import Workload, check_bound, counterexample_found
from theorems import (
    CLUSTER,
    SINGLE,
    WEIGHTED,
    d2lpm_theorem_5_1,
    dlpm_theorem_4_1,
    vtc_theorem_4_4,
    weighted_dlpm_theorem_4_1,
)

from sglang_fair.metrics.stats import backlog_intervals, max_backlogged_diff
from support import run_cluster


def test_dlpm_backlogged_service_difference_within_theorem_4_1() -> None:
    check_bound(dlpm_theorem_4_1("dlpm"), SINGLE).require_mostly_exposed()


def test_theorem_4_1_check_catches_lpm() -> None:
    assert counterexample_found(dlpm_theorem_4_1("lpm"), SINGLE)


def test_weighted_dlpm_service_per_weight_within_theorem_4_1() -> None:
    check_bound(weighted_dlpm_theorem_4_1("dlpm"), WEIGHTED).require_mostly_exposed()


def test_weighted_theorem_4_1_check_catches_lpm() -> None:
    assert counterexample_found(weighted_dlpm_theorem_4_1("lpm"), WEIGHTED)


def test_vtc_backlogged_service_difference_within_theorem_4_4() -> None:
    check_bound(vtc_theorem_4_4("vtc"), SINGLE).require_mostly_exposed()


def test_theorem_4_4_check_catches_fcfs() -> None:
    assert counterexample_found(vtc_theorem_4_4("fcfs"), SINGLE)


def test_d2lpm_backlogged_service_difference_within_theorem_5_1() -> None:
    check_bound(d2lpm_theorem_5_1("d2lpm", "dlpm"), CLUSTER).require_mostly_exposed()


def test_theorem_5_1_check_catches_cache_aware_with_lpm() -> None:
    assert counterexample_found(d2lpm_theorem_5_1("cache_aware", "lpm"), CLUSTER)


def test_infinite_router_quantum_is_not_fair_theorem_a_5() -> None:
    """[1] Thm A.5: with Q^w = infinity a client sticks to the worker holding its prefix and gets one
    worker's share while a client spread over all gets more: measured with "waiting anywhere", the
    2 |W| (U + Q^u) bound breaks."""
    assert counterexample_found(d2lpm_theorem_5_1("d2lpm", "dlpm", 1e18, every_worker=False), CLUSTER)


@pytest.mark.parametrize("policy", ["dlpm", "lpm", "vtc"])
def test_simulator_metric_agrees_with_the_bound_checker(policy: str) -> None:
    """The simulator's ``max_backlogged_service_diff`` (request records + windowed service) and the
    property tests' step checker give the same figure on the same runs ("backlogged anywhere")."""
    from fairness_support import PROPERTY
    from hypothesis import given

    @PROPERTY
    @given(CLUSTER)
    def agree(w: Workload) -> None:
        cluster, rec = run_cluster(w.requests, policy=policy, router="round_robin", workers=w.workers,
                                   capacity=w.capacity, quantum=w.quantum)
        end, ledger = float(cluster.step), cluster.ledger
        records = list(cluster.records.values())
        series = {c: ledger.series(c, "actual", end) for c in w.clients}
        metric = max_backlogged_diff(series, backlog_intervals(records, end), ledger.window)
        assert metric == pytest.approx(rec.max_diff(), abs=1e-6)

    agree()
