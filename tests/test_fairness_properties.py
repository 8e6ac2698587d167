"""The papers' fairness bounds as properties over randomized workloads, driven by the step loop.

U = w_e * L_input + w_q * M with L_input the longest prompt and M the KV pool of a worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from hypothesis import HealthCheck, Phase, find, given, settings, target
from hypothesis import strategies as st

from sglang_fair.core.cost import CostModel
from sglang_fair.sim.cluster import Cluster
from sglang_fair.sim.request import SimRequest
from support import req, run_cluster


@dataclass
class Workload:
    specs: list[tuple[int, str, list[int], int, int]]  # rid, client, tokens, output_len, arrival
    capacity: int
    quantum: float

    @property
    def requests(self) -> list[SimRequest]:
        """Fresh requests (a run mutates the ones it serves)."""
        out = []
        for rid, client, tokens, output, arrival in self.specs:
            r = req(rid, client, list(tokens), output, arrival)
            r.output_ids = [200_000 + rid * 100 + i for i in range(output)]
            out.append(r)
        return out

    @property
    def l_input(self) -> int:
        return max(len(tokens) for _, _, tokens, _, _ in self.specs)

    def u(self, cost: CostModel) -> float:
        return cost.w_e * self.l_input + cost.w_q * self.capacity


@st.composite
def workloads(draw: st.DrawFn, max_clients: int = 3, max_requests: int = 40) -> Workload:
    clients = draw(st.integers(2, max_clients))
    capacity = draw(st.integers(40, 120))
    quantum = float(draw(st.integers(1, 80)))
    n = draw(st.integers(4, max_requests))
    requests = []
    for rid in range(n):
        client = draw(st.integers(0, clients - 1))
        group = draw(st.integers(0, 2))
        prefix = draw(st.integers(0, 24))
        unique = draw(st.integers(1, 12))
        output = draw(st.integers(1, 8))
        if prefix + unique + output > capacity:
            prefix = max(0, capacity - unique - output)
        tokens = [client * 10_000 + group * 1_000 + i for i in range(prefix)]
        tokens += [100_000 + rid * 100 + i for i in range(unique)]
        arrival = draw(st.integers(0, 40))
        requests.append((rid, f"c{client}", tokens, output, arrival))
    return Workload(requests, capacity, quantum)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
COST = CostModel()


@PROPERTY
@given(workloads())
def test_dlpm_backlogged_service_difference_within_theorem_4_1(w: Workload) -> None:
    _, rec = run_cluster(w.requests, policy="dlpm", capacity=w.capacity, quantum=w.quantum)
    bound = 2 * (w.u(COST) + w.quantum)
    target(rec.max_diff() / bound)  # steer the search toward the worst case
    assert rec.max_diff() <= bound


@PROPERTY
@given(workloads(), st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=3, max_size=3))
def test_weighted_dlpm_bound_on_service_per_unit_weight(w: Workload, weights: list[float]) -> None:
    cost = CostModel(client_weights={f"c{i}": x for i, x in enumerate(weights)})
    _, rec = run_cluster(w.requests, policy="dlpm", capacity=w.capacity, quantum=w.quantum, cost=cost)
    u = w.u(cost)
    for f, g in combinations(rec.clients, 2):
        bound = 2 * w.quantum + u / cost.weight(f) + u / cost.weight(g)
        assert rec.pair_max_diff(f, g) <= bound


@PROPERTY
@given(workloads())
def test_vtc_backlogged_service_difference_within_theorem_4_4(w: Workload) -> None:
    _, rec = run_cluster(w.requests, policy="vtc", capacity=w.capacity, perceived=True)
    bound = 2 * max(COST.w_e * w.l_input, COST.w_q * w.capacity)
    target(rec.max_diff() / bound)
    assert rec.max_diff() <= bound


@PROPERTY
@given(workloads(max_requests=50), st.integers(2, 3), st.integers(1, 200))
def test_d2lpm_backlogged_service_difference_within_theorem_5_1(w: Workload, n: int, qw: int) -> None:
    _, rec = run_cluster(w.requests, policy="dlpm", router="d2lpm", workers=n, capacity=w.capacity,
                         quantum=w.quantum, router_quantum=qw, every_worker=True)
    bound = 2 * n * (w.u(COST) + w.quantum)
    target(rec.max_diff() / bound)
    assert rec.max_diff() <= bound


def test_bound_check_is_not_vacuous_lpm_violates_it() -> None:
    """The same generator and check find an LPM run that breaks the DLPM bound (DLPM keeps it)."""

    def lpm_breaks_bound(w: Workload) -> bool:
        _, rec = run_cluster(w.requests, policy="lpm", capacity=w.capacity, quantum=w.quantum)
        return rec.max_diff() > 2 * (w.u(COST) + w.quantum)

    found = find(
        workloads(max_requests=80),
        lpm_breaks_bound,
        settings=settings(max_examples=5000, deadline=None, database=None, derandomize=True,
                          phases=[Phase.generate]),
    )
    assert lpm_breaks_bound(found)
    _, rec = run_cluster(found.requests, policy="dlpm", capacity=found.capacity, quantum=found.quantum)
    assert rec.max_diff() <= 2 * (found.u(COST) + found.quantum)


# ---- work conservation ---------------------------------------------------------------------------
def fits_now(cluster: Cluster, r: SimRequest) -> bool:
    """Would ``r`` fit in its worker right now? (read-only: no clock touch, no split)."""
    w = cluster.workers[r.worker]
    if len(w.running) >= w.max_running:
        return False
    node, pos, unlocked_on_path = w.cache.root, 0, 0
    while pos < r.input_len:
        child = node.children.get(r.tokens[pos])
        if child is None:
            break
        n = 0
        while n < len(child.key) and pos + n < r.input_len and child.key[n] == r.tokens[pos + n]:
            n += 1
        pos += n
        unlocked_on_path += n if child.ref == 0 else 0
        if n < len(child.key):
            break
        node = child
    need = r.input_len - pos + r.output_len
    return need <= w.cache.free_tokens + w.cache.evictable_tokens - unlocked_on_path


class ConservationCheck:
    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.violations: list[str] = []

    def observe(self, phase: str, step: int, cluster: Cluster) -> None:
        if phase != "admitted":
            return
        for w in cluster.workers:
            if w.waiting and not w.running:
                self.violations.append(f"step {step}: worker {w.index} idle with {len(w.waiting)} waiting")
            for r in w.waiting:
                if fits_now(cluster, r) and not self.may_wait(w, r):
                    self.violations.append(f"step {step}: request {r.rid} fits but waits")

    def may_wait(self, w, r: SimRequest) -> bool:  # type: ignore[no-untyped-def]
        if self.policy == "dlpm":  # only while another waiting client still has credit
            counters = w.policy.deficits
            return counters[r.client] <= 0 and any(counters[x.client] > 0 for x in w.waiting)
        return False


@PROPERTY
@given(workloads(), st.sampled_from(["fcfs", "lpm", "dlpm"]))
def test_work_conservation(w: Workload, policy: str) -> None:
    from sglang_fair.admission import AdmissionConfig
    from sglang_fair.routing import RouterConfig
    from sglang_fair.sim.cluster import ClusterConfig

    check = ConservationCheck(policy)
    admission = AdmissionConfig(policy, w.quantum)
    cluster = Cluster(ClusterConfig(capacity=w.capacity), admission, RouterConfig("round_robin"))
    cluster.run(w.requests, check)
    assert check.violations == []


@PROPERTY
@given(workloads())
def test_vtc_never_idles_while_requests_wait(w: Workload) -> None:
    from sglang_fair.admission import AdmissionConfig
    from sglang_fair.routing import RouterConfig
    from sglang_fair.sim.cluster import ClusterConfig

    check = ConservationCheck("vtc")
    cluster = Cluster(ClusterConfig(capacity=w.capacity), AdmissionConfig("vtc"), RouterConfig("round_robin"))
    cluster.run(w.requests, check)
    assert not [v for v in check.violations if "idle" in v]
