"""The papers' fairness theorems as checks of one run (``fairness_support.Run``), and the workload
generators their property tests draw from; used by the property tests of the simulator's step loop,
of the DLPM variants and of the routers."""

from __future__ import annotations

from fairness_support import COST, Run, Verdict, Workload, contended

from support import run_cluster

SINGLE = contended(requests=(12, 40))
WEIGHTED = contended(requests=(12, 40), weights=True)
CLUSTER = contended(requests=(40, 100), workers=(2, 3))


def dlpm_theorem_4_1(policy: str) -> Run:
    """[1] Thm 4.1: clients backlogged over [t1, t2] get service within 2 (U + Q^u) of each other."""
    def run(w: Workload) -> Verdict:
        _, rec = run_cluster(w.requests, policy=policy, capacity=w.capacity, quantum=w.quantum)
        bound = 2 * (w.u(COST) + w.quantum)
        return Verdict.of(rec, lambda f, g: bound)
    return run


def weighted_dlpm_theorem_4_1(policy: str) -> Run:
    """Thm 4.1 for weighted DLPM (a refill gives Q^u * weight): per unit of weight, the service of
    f and g differs by at most 2 Q^u + U / w_f + U / w_g."""
    def run(w: Workload) -> Verdict:
        cost = w.cost
        _, rec = run_cluster(w.requests, policy=policy, capacity=w.capacity, quantum=w.quantum, cost=cost)
        u = w.u(cost)
        return Verdict.of(rec, lambda f, g: 2 * w.quantum + u / cost.weight(f) + u / cost.weight(g))
    return run


def vtc_theorem_4_4(policy: str) -> Run:
    """[2] Thm 4.4: backlogged clients' service, on VTC's own cost (w_e * every input token +
    w_q * output), differs by at most 2 max(w_e L_input, w_q M)."""
    def run(w: Workload) -> Verdict:
        _, rec = run_cluster(w.requests, policy=policy, capacity=w.capacity, perceived=True)
        bound = 2 * max(COST.w_e * w.l_input, COST.w_q * w.capacity)
        return Verdict.of(rec, lambda f, g: bound)
    return run


def d2lpm_theorem_5_1(router: str, policy: str, router_quantum: float | None = None,
                      every_worker: bool = True) -> Run:
    """[1] Thm 5.1: with D²LPM routing and DLPM on each worker, backlogged clients' service differs
    by at most 2 |W| (U + Q^u).

    Backlog notion: *backlogged on every worker* (a waiting request at each worker). This is the one
    the proof ([1] App. A.2) uses: it takes Thm 4.1's bound on each worker and adds them up over
    |W| workers, which holds only where both clients are backlogged at every worker; it argues that
    D²LPM makes a backlogged client backlogged everywhere (a client's per-worker credit runs out
    before all are refilled, so its requests spread). "Waiting anywhere" is a weaker premise the
    proof does not cover: a client held on one worker (Thm A.5's sticky client) gets one worker's
    share while one spread over all gets |W| shares. The generator spreads clients by drawing
    Q^w from 1 to 200 service units, a few requests' input at most.

    Under this notion the bound follows from Thm 4.1 on each worker whatever the router does, so
    the check tells DLPM from LPM on the workers, not D²LPM from other routers; the router's part
    shows under "waiting anywhere" (``every_worker=False``), see Thm A.5 below.
    """
    def run(w: Workload) -> Verdict:
        qw = w.router_quantum if router_quantum is None else router_quantum
        _, rec = run_cluster(w.requests, policy=policy, router=router, workers=w.workers,
                             capacity=w.capacity, quantum=w.quantum, router_quantum=qw,
                             every_worker=every_worker)
        bound = 2 * w.workers * (w.u(COST) + w.quantum)
        return Verdict.of(rec, lambda f, g: bound)
    return run
