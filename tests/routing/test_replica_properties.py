"""Router replicas that share what they know (``routing/replicas.py``): one router's bound on how a
client's charges spread over the workers holds across replicas, up to what they have not yet heard.

The bound, from the code of d2lpm and fair_cache_aware. Replica j charges client c at worker w only
where its counter q^j_w > 0, and q^j = R^j - V^j: its refills (the same at every worker) minus the
charges it knows of. A refill leaves every counter at most Q_c, so every worker's true charges T_v are
at least R^j - Q_c; and at j's dispatch to w, T_w = V^j_w + U with U the charges of c at w made by
other replicas and not yet delivered to j. So at every moment, for all live workers w and v,

    T_w - T_v < Q_c + A_w,    A_w = charge + U + F

for c's last dispatch to w: its charge, U then, and F the finish charges of c at w since (finishes
keep landing after the credit is spent, one router alike). With lag 0 U is 0: one router's Q_c + C
plus the late finishes. T is what every replica's view converges to: d2lpm charges the whole input;
fair_cache_aware the tokens w's tree lacked, here a shadow tree of every dispatch (two replicas that
send one prefix to one worker before hearing of each other both charge it; the worker holds it once).
fair_cache_aware keeps the bound for the work it places by credit, so here every request is: its
holder and balance rules (which ignore credit by design) are off.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

import pytest
from routing_support import Q

from sglang_fair.core.cost import CostModel
from sglang_fair.core.global_tree import GlobalRadixTree
from sglang_fair.routing import RouterConfig
from sglang_fair.routing.d2lpm import D2LPM
from sglang_fair.routing.fair_cache_aware import FairCacheAware
from sglang_fair.routing.replicas import Replicas

POLICIES = ("d2lpm", "fair_cache_aware")
LAGS = (0, 1, 8)
SEEDS = range(40)
EPS = 1e-6  # fair_cache_aware's quanta decay by 0.98: sums of non-integers


@dataclass
class Notice:
    """A mirror of one notice in flight in ``Replicas.pending``: who made it and what it charged."""

    origin: int
    client: str
    worker: int
    worth: float


@dataclass
class Shadow:
    """The true charges of one run, and what the bound allows at each worker."""

    cost: CostModel
    workers: int
    tree: GlobalRadixTree = field(default_factory=lambda: GlobalRadixTree(1 << 26))
    charged: dict[str, list[float]] = field(default_factory=dict)  # T[c][w]
    allowed: dict[str, list[float]] = field(default_factory=dict)  # A[c][w]
    quanta: dict[str, float] = field(default_factory=dict)  # Q_c, the largest refill so far

    def row(self, table: dict[str, list[float]], client: str) -> list[float]:
        return table.setdefault(client, [0.0] * self.workers)

    def dispatch(self, policy: str, req: Q, worker: int, undelivered: float) -> None:
        n = len(req.tokens)
        held = self.tree.match_lengths(req.tokens).get(worker, 0) if policy == "fair_cache_aware" else 0
        charge = self.cost.extend_cost(n - held)
        self.tree.insert(req.tokens, worker)
        self.row(self.charged, req.client)[worker] += charge
        self.row(self.allowed, req.client)[worker] = charge + undelivered

    def finish(self, worker: int, client: str, output: int) -> None:
        charge = self.cost.output_cost(output)
        self.row(self.charged, client)[worker] += charge
        self.row(self.allowed, client)[worker] += charge

    def excess(self) -> float:
        """The largest max_w (T_w - A_w) - min_v T_v - Q_c over clients: the bound holds iff <= 0."""
        return max((max(t - a for t, a in zip(self.charged[c], self.allowed[c], strict=True))
                    - min(self.charged[c]) - self.quanta[c] for c in self.charged), default=0.0)


@dataclass
class Outcome:
    broken: bool = False  # the bound failed at some dispatch
    refills: int = 0  # dispatches whose origin refilled the client's credit
    shared_clients: int = 0  # clients dispatched by more than one replica
    largest_undelivered: float = 0.0
    largest_notice: float = 0.0  # C: the largest charge one notice carries


class Driver:
    """Feeds one random workload through :class:`Replicas`, checking after every call."""

    def __init__(self, policy: str, seed: int, share: bool, lag: int) -> None:
        self.rng = rng = random.Random(seed)
        self.policy = policy
        weights = {f"c{i}": rng.choice([1.0, 1.0, 2.0]) for i in range(rng.randint(2, 4))}
        cost = CostModel(client_weights=weights)
        config = RouterConfig(policy=policy, num_workers=rng.randint(2, 4), quantum=rng.randint(1, 200),
                              quantum_requests=rng.randint(1, 4), cache_threshold=1.0, hold_threshold=1.0,
                              balance_abs_threshold=10**9, spill_ratio=1e9, spill_slack=1e9, quantum_s=0,
                              cost=cost)
        self.replicas = Replicas(config, rng.randint(2, 4), share=share, lag=lag)
        self.shadow = Shadow(cost, config.num_workers)
        self.prefixes = {c: rng.choice([0, 8, 32]) for c in weights}
        self.ledger: deque[Notice] = deque()
        self.inflight: list[tuple[int, str, int]] = []
        self.origins: dict[str, set[int]] = {}
        self.outcome = Outcome()

    def request(self, rid: int) -> Q:
        client = self.rng.choice(sorted(self.prefixes))
        group = self.rng.randint(0, 1)
        prefix = [(int(client[1:]) * 2 + group) * 10**4 + i for i in range(self.prefixes[client])]
        unique = [10**9 + rid * 100 + i for i in range(self.rng.randint(1, 40))]
        return Q(rid, client, prefix + unique)

    def run(self, requests: int) -> Outcome:
        for rid in range(requests):
            self.dispatch(self.request(rid))
            for _ in range(self.rng.randint(0, 2)):
                if self.inflight:
                    self.finish(self.inflight.pop(self.rng.randrange(len(self.inflight))))
        return self.outcome

    def undelivered(self, replica: int, client: str | None, worker: int) -> list[Notice]:
        return [n for n in self.ledger if n.origin != replica and n.worker == worker
                and client in (None, n.client)]

    def dispatch(self, req: Q) -> None:
        k = self.replicas.next
        origin = self.replicas.replicas[k]
        assert isinstance(origin, D2LPM)
        credit = origin.counters(req.client)
        self.outcome.refills += all(credit[w] <= 0 for w in origin.alive)
        held = origin.tree.match_lengths(req.tokens) if isinstance(origin, FairCacheAware) else {}
        worker = self.replicas.route(req)
        late = sum(n.worth for n in self.undelivered(k, req.client, worker))
        self.shadow.dispatch(self.policy, req, worker, late)
        worth = self.shadow.cost.extend_cost(len(req.tokens) - held.get(worker, 0))
        self.record(Notice(k, req.client, worker, worth))
        self.origins.setdefault(req.client, set()).add(k)
        self.outcome.shared_clients = sum(len(o) > 1 for o in self.origins.values())
        quantum = origin.quantum(req.client) if isinstance(origin, FairCacheAware) else \
            origin.config.quantum * origin.config.cost.weight(req.client)
        self.shadow.quanta[req.client] = max(self.shadow.quanta.get(req.client, 0.0), quantum)
        self.outcome.largest_undelivered = max(self.outcome.largest_undelivered, late)
        self.inflight.append((worker, req.client, self.rng.randint(0, 16)))
        self.outcome.broken |= self.shadow.excess() > EPS

    def finish(self, done: tuple[int, str, int]) -> None:
        worker, client, output = done
        origin = self.replicas.origin[worker, client][0]
        self.replicas.on_finish(worker, client, output)
        self.shadow.finish(worker, client, output)
        self.record(Notice(origin, client, worker, self.shadow.cost.output_cost(output)))

    def record(self, notice: Notice) -> None:
        """Mirror ``Replicas.pending`` (a notice is appended, then the oldest are delivered), then check
        that the notices in flight are at most ``lag`` and each replica's queues are short by at most
        the notices it has not heard."""
        self.outcome.largest_notice = max(self.outcome.largest_notice, notice.worth)
        if not self.replicas.share:
            return
        self.ledger.append(notice)
        while len(self.ledger) > len(self.replicas.pending):
            self.ledger.popleft()
        assert len(self.ledger) <= self.replicas.lag
        true_queue = self.replicas.queue
        for k, replica in enumerate(self.replicas.replicas):
            for w in replica.workers:
                assert abs(replica.queue[w] - true_queue[w]) <= len(self.undelivered(k, None, w))


def run(policy: str, seed: int, share: bool = True, lag: int = 0) -> tuple[Driver, Outcome]:
    driver = Driver(policy, seed, share, lag)
    return driver, driver.run(requests=120)


@pytest.mark.parametrize("lag", LAGS)
@pytest.mark.parametrize("policy", POLICIES)
def test_sharing_replicas_keep_each_clients_charges_within_the_bound(policy: str, lag: int) -> None:
    outcomes = []
    for seed in SEEDS:
        driver, outcome = run(policy, seed, lag=lag)
        assert not outcome.broken, f"{policy} lag {lag} seed {seed}: excess {driver.shadow.excess()}"
        assert outcome.largest_undelivered <= lag * outcome.largest_notice + EPS
        outcomes.append(outcome)
    assert sum(o.refills > 2 for o in outcomes) >= 0.8 * len(outcomes), "too few refills"
    assert sum(o.shared_clients >= 2 for o in outcomes) >= 0.8 * len(outcomes)
    undelivered = sum(o.largest_undelivered > 0 for o in outcomes)
    assert undelivered == 0 if lag == 0 else undelivered >= 0.5 * len(outcomes)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_bound_catches_replicas_that_do_not_share(policy: str) -> None:
    """Control: replicas that do not share each spend their own credit, so together they may charge a
    worker R times a quantum before any of them refills."""
    broken = sum(run(policy, seed, share=False)[1].broken for seed in SEEDS)
    assert broken >= 0.3 * len(SEEDS), f"not sharing broke the bound in only {broken} of {len(SEEDS)}"


@pytest.mark.parametrize("lag", (1, 8))
@pytest.mark.parametrize("policy", POLICIES)
def test_after_flush_the_replicas_agree(policy: str, lag: int) -> None:
    """Queues and trees equal; counters differ by one constant per client (the refills each made)."""
    for seed in SEEDS[:10]:
        driver, _ = run(policy, seed, lag=lag)
        replicas = driver.replicas
        assert replicas.pending
        replicas.flush()
        first = replicas.replicas[0]
        for other in replicas.replicas[1:]:
            assert other.queue == replicas.queue == first.queue
            assert other.routed_tokens == first.routed_tokens
            assert dict(other.tree.worker_tokens) == dict(first.tree.worker_tokens)
            mine, theirs = first.counter_view(), other.counter_view()
            for client, counters in mine.items():
                gaps = [a - b for a, b in zip(counters, theirs[client], strict=True)]
                assert max(gaps) - min(gaps) < EPS, (seed, client, gaps)


def test_after_flush_per_server_replicas_differ_by_one_constant_per_client_and_server() -> None:
    """per_server keeps a credit per server (its own refills), so after flush the replicas' counters
    differ by one constant per client on each server's workers."""
    rng = random.Random(0)
    config = RouterConfig(policy="per_server", num_workers=4, server_workers=2, quantum=50)
    replicas = Replicas(config, 3, lag=8)
    inflight: list[tuple[int, str]] = []
    for rid in range(200):
        client = f"c{rng.randint(0, 2)}"
        worker = replicas.route(Q(rid, client, [10**9 + rid * 100 + i for i in range(rng.randint(1, 40))]))
        inflight.append((worker, client))
        if rng.random() < 0.5:
            replicas.on_finish(*inflight.pop(rng.randrange(len(inflight))), rng.randint(0, 16))
    assert replicas.pending
    replicas.flush()
    first, views = replicas.replicas[0], [r.counter_view() for r in replicas.replicas]
    for other, view in zip(replicas.replicas[1:], views[1:], strict=True):
        assert other.queue == first.queue == replicas.queue
        for client, counters in views[0].items():
            gaps = [a - b for a, b in zip(counters, view[client], strict=True)]
            assert all(abs(gaps[w] - gaps[w - w % 2]) < EPS for w in range(4)), (client, gaps)
    assert any(len({round(a - b, 6) for a, b in zip(views[0][c], v[c], strict=True)}) > 1
               for v in views[1:] for c in views[0]), "every gap is one constant: the check shows nothing"
