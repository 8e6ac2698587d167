"""Builders shared by the tests: simulated requests and one-call cluster runs."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_fair.admission import AdmissionConfig, AdmissionPolicy, make_admission_policy
from sglang_fair.core.cost import CostModel
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.backlog import BacklogRecorder
from sglang_fair.sim.lockstep import Lockstep, LockstepConfig
from sglang_fair.sim.request import EngineRequest


def req(rid: int, client: str, tokens: list[int], output_len: int = 1, arrival: float = 0) -> EngineRequest:
    return EngineRequest(rid=rid, client=client, tokens=tokens, output_len=output_len, arrival=arrival)


def run_cluster(
    requests: list[EngineRequest],
    policy: str = "dlpm",
    router: str = "round_robin",
    workers: int = 1,
    capacity: int = 4096,
    max_running: int = 256,
    quantum: float = 100.0,
    router_quantum: float = 100.0,
    quantum_s: float = 0.0,
    cost: CostModel | None = None,
    every_worker: bool = False,
    perceived: bool = False,
) -> tuple[Lockstep, BacklogRecorder]:
    cost = cost or CostModel()
    cluster = Lockstep(
        LockstepConfig(workers=workers, capacity=capacity, max_running=max_running),
        AdmissionConfig(policy=policy, quantum=quantum, quantum_s=quantum_s, cost=cost),
        RouterConfig(policy=router, num_workers=workers, quantum=router_quantum, cost=cost),
    )
    clients = sorted({r.client for r in requests})
    recorder = BacklogRecorder(clients, cost, every_worker=every_worker, perceived=perceived)
    cluster.run(requests, recorder)
    return cluster, recorder


def admission_order(cluster: Lockstep) -> list[str]:
    """Clients of the finished requests in the order they were admitted."""
    done = sorted(cluster.records.values(), key=lambda r: (r.admitted, r.first_token, r.rid))
    return [r.client for r in done if r.finished >= 0]


@dataclass
class R:
    """A waiting request as the admission policies see it (hand-built tests)."""

    rid: int
    client: str
    input_len: int
    cached_len: int = 0
    arrival: float = 0.0


def policy(name: str, quantum: float = 10.0, **weights: float) -> AdmissionPolicy:
    """Admission policy ``name`` with Q^u ``quantum`` and per-client ``weights``."""
    return make_admission_policy(AdmissionConfig(name, quantum, CostModel(client_weights=weights)))


def arrive(p: AdmissionPolicy, *reqs: R) -> list[R]:
    for r in reqs:
        p.on_arrival(r)
    return list(reqs)
