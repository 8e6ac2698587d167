"""d2lpm_guarded (routing/d2lpm_guarded.py) against D²LPM on hand-built inputs, and its fairness.

Herding: a short template shared by every client makes D²LPM send every client to the first worker
that held it; the variant's minimum match and load guard spread them and keep each client's own
prefix local. Fairness: [1] Thm 5.1 through the existing property machinery, and the router's own
part, the per-(client, worker) counter invariant, for both routers with a negative control.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import pytest
from fairness_support import PROPERTY, check_bound, counterexample_found
from hypothesis import given
from hypothesis import strategies as st
from theorems import CLUSTER, d2lpm_theorem_5_1

import support
from sglang_fair.routing import RouterConfig, RouteRequest, RoutingPolicy, least_loaded, make_routing_policy
from sglang_fair.routing.d2lpm import D2LPM

TEMPLATE = list(range(16))  # shared by every client, shorter than guard_min_match (64)


@dataclass
class Q:
    rid: int
    client: str
    tokens: list[int] = field(default_factory=list)


def router(name: str, workers: int = 4, **kw: float) -> RoutingPolicy:
    return make_routing_policy(RouterConfig(policy=name, num_workers=workers, **kw))  # type: ignore[arg-type]


def program(rid: int, client: int) -> Q:
    """Template + the client's own 200-token prefix + a unique suffix."""
    own = [1000 * (client + 1) + i for i in range(200)]
    return Q(rid, f"c{client}", TEMPLATE + own + [10**6 + rid])


def routed(r: RoutingPolicy, rounds: int = 3, clients: int = 4) -> dict[str, set[int]]:
    """Workers each client's programs went to: ``rounds`` programs per client, round robin."""
    out: dict[str, set[int]] = {}
    for rid in range(rounds * clients):
        q = program(rid, rid % clients)
        out.setdefault(q.client, set()).add(r.route(q))
    return out


def test_d2lpm_herds_every_client_onto_the_template_holder() -> None:
    d2 = router("d2lpm", quantum=1e9)
    assert routed(d2) == {f"c{c}": {0} for c in range(4)}
    assert d2.queue == [12, 0, 0, 0]


def test_guarded_spreads_clients_and_keeps_each_prefix_local() -> None:
    g = router("d2lpm_guarded", quantum=1e9)
    assert routed(g) == {f"c{c}": {c} for c in range(4)}  # one worker per client, its own prefix
    assert g.queue == [3, 3, 3, 3]


def test_minimum_match_counts_a_whole_short_prompt() -> None:
    g = router("d2lpm_guarded", workers=2, quantum=1e9)
    g.route(Q(0, "a", [5] * 20))
    g.queue[0] = 3  # a 20-token prompt fully held by worker 0 is locality, below 64 tokens or not
    assert g.route(Q(1, "a", [5] * 20)) == 0 and g.last_decision == "holder"  # type: ignore[attr-defined]
    assert g.route(Q(2, "a", [5] * 20 + [6] * 50)) == 1  # 20 of 70 tokens: not a holder
    assert g.last_decision == "short"  # type: ignore[attr-defined]


def test_load_guard_sends_a_hot_prefix_to_the_lightest_worker() -> None:
    kw = {"quantum": 1e9, "balance_abs_threshold": 2, "balance_rel_threshold": 1.5}
    doc = list(range(100))
    d2, g = router("d2lpm", workers=2, **kw), router("d2lpm_guarded", workers=2, **kw)
    got_d2 = [d2.route(Q(i, "a", doc + [i + 1000])) for i in range(6)]
    got_g = [g.route(Q(i, "a", doc + [i + 1000])) for i in range(6)]
    assert got_d2 == [0] * 6  # the holder, whatever its queue
    assert got_g == [0, 0, 0, 1, 1, 1]  # 3 - 0 > 2 and 3 > 1.5 x 0: the guard; then both hold doc
    assert g.last_decision == "holder"  # type: ignore[attr-defined]
    assert g.queue == [3, 3]


def test_guarded_never_leaves_g_avail() -> None:
    g = router("d2lpm_guarded", workers=3, quantum=100)
    doc = [9] * 90
    assert g.route(Q(0, "a", doc)) == 0
    assert g.route(Q(1, "a", doc + [1])) == 0  # the holder still has credit (10)
    assert g.route(Q(2, "a", doc + [2])) == 1  # q[a][0] = 10 - 91 < 0: the holder has none
    assert g.last_decision == "no-credit"  # type: ignore[attr-defined]
    assert g.counters("a") == [10.0 - 91, 100.0 - 91, 100.0]


def test_guarded_backlogged_service_difference_within_theorem_5_1() -> None:
    check_bound(d2lpm_theorem_5_1("d2lpm_guarded", "dlpm"), CLUSTER).require_mostly_exposed()


def test_guarded_with_every_branch_live_within_theorem_5_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generator's prompts are at most 36 tokens: with a 4-token minimum match and a guard at a
    queue difference of 2 the holder, short-match and guard branches all take part."""
    config = functools.partial(RouterConfig, guard_min_match=4, balance_abs_threshold=2)
    monkeypatch.setattr(support, "RouterConfig", config)
    check_bound(d2lpm_theorem_5_1("d2lpm_guarded", "dlpm"), CLUSTER).require_mostly_exposed()


def test_guard_does_not_replace_the_counters_theorem_a_5(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Q^w = infinity the counters never force a client off its prefix holder, and the
    minimum match and guard do not either: "waiting anywhere", the bound breaks as for d2lpm."""
    monkeypatch.setattr(support, "RouterConfig", functools.partial(RouterConfig, guard_min_match=4))
    assert counterexample_found(d2lpm_theorem_5_1("d2lpm_guarded", "dlpm", 1e18, every_worker=False), CLUSTER)


def test_theorem_5_1_check_catches_guarded_with_lpm_workers() -> None:
    assert counterexample_found(d2lpm_theorem_5_1("d2lpm_guarded", "lpm"), CLUSTER)


class Greedy(D2LPM):
    """Negative control: D²LPM that sends r to the holder even without credit (leaves G_avail)."""

    def pick(self, req: RouteRequest, available: list[int]) -> int:
        _, holders = self.tree.longest_match(req.tokens)
        return least_loaded(sorted(holders) or available, self.queue)


Specs = list[tuple[int, int, int]]  # (client, shared prefix group, unique length)
REQUESTS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(1, 40)),
                    min_size=5, max_size=80)


def counter_invariant_holds(r: D2LPM, specs: Specs) -> bool:
    """[1] Alg. 2's router invariant: with R refills so far, every worker has charged client i at
    least (R - 1) Q^w (refills happen only when every counter is spent) and, at dispatch, less than
    R Q^w + one request's input (only workers with credit are chosen). No finishes here."""
    qw, largest = r.config.quantum, 0
    charged: dict[str, list[float]] = {}
    for rid, (client, group, unique) in enumerate(specs):
        tokens = [7000 + 100 * group + i for i in range(70)] + [10**6 + rid * 100 + i for i in range(unique)]
        largest = max(largest, len(tokens))
        worker = r.route(Q(rid, f"c{client}", tokens))
        row = charged.setdefault(f"c{client}", [0.0] * len(r.workers))
        row[worker] += len(tokens)
        for c, spent in charged.items():
            refills = round((r.counters(c)[0] + spent[0]) / qw)
            if any(not (refills - 1) * qw <= s < refills * qw + largest for s in spent):
                return False
    return True


@pytest.mark.parametrize("name", ["d2lpm", "d2lpm_guarded"])
def test_router_counter_invariant(name: str) -> None:
    @PROPERTY
    @given(REQUESTS, st.integers(2, 4), st.integers(20, 300))
    def holds(specs: Specs, workers: int, qw: int) -> None:
        r = router(name, workers=workers, quantum=qw, guard_min_match=32, balance_abs_threshold=2)
        assert isinstance(r, D2LPM) and counter_invariant_holds(r, specs)

    holds()


def test_counter_invariant_catches_a_router_leaving_g_avail() -> None:
    broken = [counter_invariant_holds(Greedy(RouterConfig(num_workers=2, quantum=50)), [(0, 0, 5)] * n)
              for n in (5, 20)]
    assert broken == [False, False]
