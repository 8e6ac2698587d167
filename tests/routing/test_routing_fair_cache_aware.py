"""fair_cache_aware: SGLang's cache-aware rule with D²LPM's per-client credit placing new work."""

from __future__ import annotations

import pytest
from fairness_support import PROPERTY, check_bound, contended, counterexample_found
from hypothesis import given
from hypothesis import strategies as st
from routing_support import Q, router
from theorems import d2lpm_theorem_5_1

from sglang_fair.routing import RoutingPolicy
from sglang_fair.routing.fair_cache_aware import FairCacheAware

DOC = list(range(1000, 1100))


def test_a_programs_next_call_stays_on_its_holder_without_credit() -> None:
    r = router("fair_cache_aware", workers=2, quantum=50)
    assert isinstance(r, FairCacheAware)
    assert r.route(Q(0, "a", DOC + [1])) == 0 and r.last_decision == "credit"
    assert r.counters("a") == [max(50, 4 * 101) - 101, max(50, 4 * 101)]  # charged where it went
    for i in range(2, 8):  # 100 of 101 tokens cached: charged 1 each, credit or not
        assert r.route(Q(i, "a", DOC + [i])) == 0 and r.last_decision == "holder"
    assert r.counters("a")[0] == 404 - 101 - 6


def test_new_work_goes_where_the_client_has_credit() -> None:
    r = router("fair_cache_aware", workers=2, quantum=50, quantum_requests=1)
    assert isinstance(r, FairCacheAware)
    assert r.route(Q(0, "a", [7] * 60)) == 0  # the first refill: Q_a = max(50, 60) on both
    assert r.route(Q(1, "b", [8] * 10)) == 1  # b: the smaller tree of its credit workers
    assert r.route(Q(2, "a", [9] * 60)) == 1  # a spent its credit on 0: new work goes to 1
    assert r.counters("a") == [0.0, 0.0] and r.last_decision == "credit"
    assert r.route(Q(3, "a", [6] * 60)) == 0  # none left: both refilled, the smaller tree (0: 60 < 70)


def test_an_unbalanced_cluster_sends_to_the_least_loaded_worker() -> None:
    r = router("fair_cache_aware", workers=2, quantum=1e9, balance_abs_threshold=2)
    assert isinstance(r, FairCacheAware)
    assert [r.route(Q(i, "a", DOC + [i])) for i in range(3)] == [0, 0, 0]  # 2 - 0 is not > 2
    assert r.route(Q(3, "a", DOC + [3])) == 1 and r.last_decision == "balance"  # 3 - 0 > 2, 3 > 1.5 x 0


def test_the_client_quantum_covers_its_recent_largest_request() -> None:
    r = router("fair_cache_aware", workers=2, quantum=50, quantum_requests=4)
    assert isinstance(r, FairCacheAware)
    r.route(Q(0, "a", [1] * 30))
    assert r.quantum("a") == 120 and r.quantum("b") == 50
    r.route(Q(1, "a", [2] * 5))
    assert r.quantum("a") == pytest.approx(4 * 30 * 0.98)  # the largest fades as smaller ones come


Specs = list[tuple[int, int, int, bool]]  # (client, prefix group: -1 none, unique length, finish now)
REQUESTS = st.lists(st.tuples(st.integers(0, 2), st.integers(-1, 2), st.integers(1, 60), st.booleans()),
                    min_size=5, max_size=80)


def decisions(r: RoutingPolicy, specs: Specs) -> list[int]:
    out = []
    for rid, (client, group, unique, finish) in enumerate(specs):
        prefix = [7000 + 100 * group + i for i in range(70)] if group >= 0 else []
        worker = r.route(Q(rid, f"c{client}", prefix + [10**6 + rid * 100 + i for i in range(unique)]))
        out.append(worker)
        if finish:
            r.on_finish(worker, f"c{client}", unique % 7)
    return out


def test_with_unbounded_credit_it_routes_exactly_as_cache_aware() -> None:
    """The credit only ever narrows where new work may go: with a quantum no client spends, every
    decision is SGLang's cache-aware router's."""
    @PROPERTY
    @given(REQUESTS, st.integers(2, 4), st.integers(1, 8))
    def same(specs: Specs, workers: int, balance: int) -> None:
        kw = {"workers": workers, "balance_abs_threshold": balance}
        assert decisions(router("fair_cache_aware", quantum=1e18, **kw), specs) == \
            decisions(router("cache_aware", **kw), specs)

    same()


def spread_holds(r: RoutingPolicy, specs: list[tuple[int, int]], narrowed: list[bool] | None = None) -> bool:
    """Placed by credit alone (unique prompts, a balance rule that never fires), each client's charges
    at any two live workers differ by less than its largest quantum plus one request: its counters stay
    within (-one request, Q_c]. ``narrowed`` records, per placement, whether the client's credit left
    some live workers out (the precondition: where it never does, the check shows nothing)."""
    charged: dict[str, list[int]] = {}
    quanta: dict[str, float] = {}
    for rid, (client, size) in enumerate(specs):
        name = f"c{client}"
        if narrowed is not None and isinstance(r, FairCacheAware):
            credit = sum(r.counters(name)[w] > 0 for w in r.alive)
            narrowed.append(0 < credit < len(r.alive))
        worker = r.route(Q(rid, name, [10**6 + rid * 100 + i for i in range(size)]))
        row = charged.setdefault(name, [0] * len(r.workers))
        row[worker] += size
        if isinstance(r, FairCacheAware):
            quanta[name] = max(quanta.get(name, 0.0), r.quantum(name))
        largest = max(s for c, s in specs if f"c{c}" == name)
        if max(row) - min(row) >= quanta.get(name, r.config.quantum) + largest:
            return False
    return True


@st.composite
def new_work(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Two or three clients, each with its own request size (1 to 60 tokens), interleaved at random:
    the mix where placing by tree size alone piles one client's work on one worker."""
    sizes = draw(st.lists(st.integers(1, 60), min_size=2, max_size=3))
    order = draw(st.lists(st.integers(0, len(sizes) - 1), min_size=20, max_size=120))
    return [(c, sizes[c]) for c in order]


NEW_WORK = new_work()


def test_new_work_spreads_each_clients_charges_over_the_workers() -> None:
    """The router's part of [1] Thm 5.1's argument, for the work it places by credit: a backlogged
    client's charges reach every worker before its credit is renewed."""
    examples: list[bool] = []

    @PROPERTY
    @given(NEW_WORK, st.integers(2, 4), st.integers(1, 120))
    def holds(specs: list[tuple[int, int]], workers: int, qw: int) -> None:
        r = router("fair_cache_aware", workers=workers, quantum=qw, quantum_requests=1,
                   balance_abs_threshold=10**9)
        narrowed: list[bool] = []
        assert spread_holds(r, specs, narrowed)
        examples.append(any(narrowed))

    holds()
    narrow = sum(examples)
    assert narrow >= 0.5 * len(examples), f"credit narrowed the choice in {narrow} of {len(examples)}"


def test_the_spread_check_catches_cache_aware() -> None:
    """Control: cache_aware places new work on the smallest tree, whoever sent it, so a client whose
    large requests alternate with another's many small ones lands on the same worker every time."""
    specs = ([(0, 60)] + [(1, 1)] * 60) * 3
    assert not spread_holds(router("cache_aware", workers=2, quantum=20, balance_abs_threshold=10**9), specs)
    assert spread_holds(router("fair_cache_aware", workers=2, quantum=20, balance_abs_threshold=10**9), specs)


# Two workers: a router that keeps each client's prefix where it is cached backlogs a client at every
# worker less often than D²LPM does; on the shared generator's 2-3 workers the premise of Thm 5.1 then
# occurs in about 55% of the examples (d2lpm: 83%), on two workers in about 75%.
TWO_WORKERS = contended(requests=(40, 100), workers=(2, 2))


def test_backlogged_service_difference_within_theorem_5_1() -> None:
    check_bound(d2lpm_theorem_5_1("fair_cache_aware", "dlpm"), TWO_WORKERS).require_mostly_exposed()


def test_theorem_5_1_check_catches_fair_cache_aware_with_lpm_workers() -> None:
    assert counterexample_found(d2lpm_theorem_5_1("fair_cache_aware", "lpm"), TWO_WORKERS)
