"""Work conservation, checked against the papers' definition rather than against a policy's code.

[1] §3, property 3 (after [2]): "no worker should be idle if there are requests in the queue". In the
step loop a worker with nothing running holds no locked cache and every queued request fits its pool
(the host refuses larger ones), so an idle worker after admission with requests waiting breaks it.

[1] §4.2 also says DLPM "does not reject a request if it fits into the running batch". Algorithm 1
as written does not keep that stronger promise: a client whose counter is spent waits, even when its
request fits, as long as another queued client still has credit (CHECKREFILL returns at line 5), for
instance because that client's own request does not fit. This keeps big requests from starving and
the Thm 4.1 bound intact. So DLPM is held to property 3, and the stronger rule (every request that
fits is admitted) is checked only for FCFS and LPM, which admit in order and skip what does not fit;
a hand-built run and a property-level control show DLPM breaking the stronger rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from fairness_support import CONTROL, PROPERTY, Workload, contended
from hypothesis import given

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.base import Budget, R, WaitingRequest
from sglang_fair.admission.fcfs import FCFS
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.lockstep import Lockstep, LockstepConfig
from sglang_fair.sim.request import EngineRequest
from sglang_fair.sim.worker import EngineWorker
from support import req

WORKLOADS = contended(requests=(4, 20), workers=(1, 2))


def fits_now(w: EngineWorker, r: EngineRequest) -> bool:
    """Would ``r`` fit in its worker right now, its whole output reserved beside the running requests'
    remaining outputs? Requests admitted to the step in progress count as running. (Read-only: no
    clock touch, no split.)"""
    planned = [req for req, _ in w.plan.batch] if w.plan is not None else []
    if len(w.running) + len(planned) >= w.config.max_running:
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
    future = w.future_reservation() + sum(p.output_len - p.generated for p in planned)
    return need <= w.cache.free_tokens + w.cache.evictable_tokens - unlocked_on_path - future


class ConservationCheck:
    """After each admission: property 3 (``idle``), and optionally the strict rule (``fits``)."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.violations: list[str] = []
        self.contended_steps = 0  # steps that ended admission with requests still waiting

    def observe(self, phase: str, step: int, cluster: Lockstep) -> None:
        if phase != "admitted":
            return
        for w in cluster.workers:
            self.contended_steps += bool(w.waiting)
            if w.waiting and w.idle():
                self.violations.append(f"step {step}: worker {w.index} idle with {len(w.waiting)} waiting")
            if self.strict:
                self.violations += [f"step {step}: request {r.rid} fits but waits"
                                    for r in w.waiting if fits_now(w, r)]


class RateLimited(FCFS):
    """[2]'s non-work-conserving baseline, a request-rate limit: each client gets at most one
    admission every ``period`` admission steps, however idle the worker."""

    name = "rate_limited"

    def __init__(self, config: AdmissionConfig, period: int = 4) -> None:
        super().__init__(config)
        self.period, self.steps = period, 0
        self.last: dict[str, float] = {}

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        self.steps += 1
        admitted: list[R] = []
        for r in sorted(waiting, key=lambda r: r.arrival):
            if self.steps - self.last.get(r.client, -math.inf) >= self.period and budget.try_add(r):
                self.last[r.client] = self.steps
                self._charge(r.client, self._admit(r))
                admitted.append(r)
        return admitted


def conservation_run(w: Workload, policy: str, strict: bool) -> ConservationCheck:
    admission = AdmissionConfig(policy if policy != "rate_limited" else "fcfs", w.quantum)
    cluster = Lockstep(LockstepConfig(workers=w.workers, capacity=w.capacity), admission,
                      RouterConfig("round_robin", num_workers=w.workers))
    if policy == "rate_limited":
        for worker in cluster.workers:
            worker.policy = RateLimited(admission)
    check = ConservationCheck(strict)
    cluster.run(w.requests, check)
    return check


def conservation_holds(policy: str, strict: bool, config: object = PROPERTY) -> tuple[int, int]:
    """Run the property; return (examples, examples in which requests waited after an admission)."""
    seen = [0, 0]

    @config  # type: ignore[operator]
    @given(WORKLOADS)
    def holds(w: Workload) -> None:
        check = conservation_run(w, policy, strict)
        seen[0] += 1
        seen[1] += check.contended_steps > 0
        assert check.violations == [], check.violations[:3]

    holds()
    return seen[0], seen[1]


@pytest.mark.parametrize("policy", ["fcfs", "lpm", "vtc", "dlpm"])
def test_no_worker_idles_while_requests_wait(policy: str) -> None:
    examples, contended_examples = conservation_holds(policy, strict=False)
    assert contended_examples >= examples / 2, f"only {contended_examples} of {examples} had a queue"


@pytest.mark.parametrize("policy", ["fcfs", "lpm"])
def test_every_request_that_fits_is_admitted(policy: str) -> None:
    examples, contended_examples = conservation_holds(policy, strict=True)
    assert contended_examples >= examples / 2, f"only {contended_examples} of {examples} had a queue"


@pytest.mark.parametrize(("policy", "strict", "found"),
                         [("rate_limited", False, "idle with"), ("dlpm", True, "fits but waits")])
def test_conservation_check_catches_a_violation(policy: str, strict: bool, found: str) -> None:
    """Negative controls: a rate limit idles workers; DLPM leaves fitting requests waiting."""
    with pytest.raises(AssertionError, match=found):
        conservation_holds(policy, strict, CONTROL)


class SmallOnly:
    """A budget in which only requests of at most ``limit`` input tokens fit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def try_add(self, r: WaitingRequest) -> bool:
        return r.input_len <= self.limit

    def exhausted(self) -> bool:
        return False


def test_dlpm_as_written_leaves_a_fitting_request_waiting() -> None:
    """Alg. 1: B's counter is spent and A still has credit but its request does not fit, so B's
    fitting request waits (CHECKREFILL returns at line 5); FCFS admits it."""
    big, small1, small2 = req(0, "A", list(range(50))), req(1, "B", [100] * 10), req(2, "B", [200] * 10)
    for name in ("dlpm", "fcfs"):
        policy = make_admission_policy(AdmissionConfig(name, quantum=10.0))
        for r in (big, small1, small2):
            policy.on_arrival(r)
        first = policy.select([big, small1], SmallOnly(20))
        assert first == [small1]  # the refill gave both 10; B spent its 10 on ten extend tokens
        second = policy.select([big, small2], SmallOnly(20))
        assert second == ([] if name == "dlpm" else [small2]), name
