"""The band reserve (``admission/headroom.py``) as properties over randomized traffic on a step loop (one
admission per step, each request running its own number of steps, the clock ticked every step: one step
is one second; C running slots; band 0 is one client, ``hi``; later bands ``mid`` (1, in some trials) and
``lo`` (2), which keeps more requests waiting than the worker runs).

The test computes its own reserve, a lower bound of the policy's: R(s) = min(the most requests band 0
had in flight (waiting or running) at a step of the last W seconds, floor(share x C), C - 1) while band
0 had one in flight in that window, else 0 (the policy remembers one to two windows, so its reserve is
at least this).

- the bound: no step that admits a later band's request leaves the later bands more than C - R(s)
  running;
- no wait for a later band's finish: a band 0 request that arrives while band 0's in flight count is
  within the reserve band 0 had established before it (its peak before this step) is admitted in the
  step it arrives, unless a later band's request admitted while that reserve was smaller still runs
  (nothing is preempted);
- release: once band 0 has had nothing in flight for W seconds, ``lo`` runs on every slot (no lasting
  throughput loss), or, with a floor (``band_reserve_floor``, 0 in the other tests), on all but the
  floor's slots, and band 0's first request after such a quiet spell is admitted in the step it arrives.
- several earlier bands: while bands 0 and 1 both hold reserves and band 2 waits, at most
  floor(share x C) slots are idle.

The prefill pace is off here (``band_prefill_share`` 1): it has its own properties (``test_band_pace.py``).

Negative controls: bands without the reserve (``band_reserve_s`` 0) fail the first two; a reserve whose
window outlasts the run never releases and fails the third; without the floor the first request
after a quiet spell waits for a later band's finish; reserves summed without that cap (a first
version) fail the fourth. Each property also shows its precondition
occurring (steps checked, arrivals within the reserve).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.admission.headroom import Headroom
from sglang_fair.core.errors import ConfigError
from support import R

TRIALS = 20
SHARE = 0.5


@dataclass
class Job:
    req: R
    steps: int
    arrived: int
    band: int
    admitted: int = -1
    reserve_then: int = 0  # the test's R at its admission step


@dataclass
class Trace:
    over_bound: int = 0  # steps at which an admission left the later bands over C - R
    bound_checked: int = 0  # steps at which a later band was admitted while R > 0
    waited: int = 0  # band 0 arrivals within their established reserve not admitted at once
    within: int = 0  # band 0 arrivals within their established reserve (no smaller-reserve later job running)
    idle_over: int = 0  # steps that left more than floor(share x C) slots idle while a later band waited
    idle_checked: int = 0  # steps at which band 2 waited while bands 0 and 1 both held reserves
    lo_running: list[int] = field(default_factory=list)  # per step, after admission
    last_hi: int = -1  # the last step band 0 had a request in flight


def reserve(history: list[tuple[int, int]], step: int, window: float, slots: int) -> int:
    recent = [n for t, n in history if step - t <= window]
    if not any(recent):
        return 0
    return min(max(recent), math.floor(SHARE * slots), slots - 1)


def run(policy: str, jobs: list[Job], slots: int, bands: dict[str, float], window: float, steps: int,
        reserve_s: float, floor: int = 0) -> Trace:
    p = make_admission_policy(AdmissionConfig(policy, quantum=50.0, client_bands=bands, band_aging_s=1e9,
                                              band_reserve_s=reserve_s, band_reserve_share=SHARE,
                                              band_reserve_floor=floor,
                                              band_prefill_share=1.0))  # the reserve alone: test_band_pace
    pending = sorted(jobs, key=lambda j: j.arrived)
    waiting: list[Job] = []
    running: list[tuple[int, Job]] = []
    history: list[tuple[int, int]] = []  # (step, band 0 requests in flight)
    mid_history: list[tuple[int, int]] = []  # (step, band 1 requests in flight)
    trace = Trace()
    for step in range(steps):
        for end, job in [r for r in running if r[0] <= step]:
            running.remove((end, job))
            p.on_output(job.req.client, 1)
            p.on_finish(job.req)
        arrived = []
        while pending and pending[0].arrived <= step:
            job = pending.pop(0)
            p.on_arrival(job.req)
            waiting.append(job)
            arrived.append(job)
        p.tick(float(step))
        before = reserve(history, step, window, slots)  # what band 0 had established before this step
        inflight = sum(j.band == 0 for j in waiting) + sum(j.band == 0 for _, j in running)
        history.append((step, inflight))
        mid_history.append((step, sum(j.band == 1 for j in waiting) + sum(j.band == 1 for _, j in running)))
        trace.last_hi = step if inflight else trace.last_hi
        now_reserve = reserve(history, step, window, slots)
        legacy = any(j.band > 0 and j.reserve_then < before for _, j in running)
        by_rid = {j.req.rid: j for j in waiting}
        admitted = p.select([j.req for j in waiting], SlotBudget(slots - len(running)))
        for req in admitted:
            job = by_rid[req.rid]
            job.admitted, job.reserve_then = step, now_reserve
            waiting.remove(job)
            running.append((step + job.steps, job))
        later = sum(j.band > 0 for _, j in running)
        if now_reserve and any(by_rid[r.rid].band > 0 for r in admitted):
            trace.bound_checked += 1
            trace.over_bound += later > slots - now_reserve
        if before and inflight <= before and not legacy:
            for job in (j for j in arrived if j.band == 0):
                trace.within += 1
                trace.waited += job.admitted != step
        if any(j.band == 2 for j in waiting) and now_reserve and reserve(mid_history, step, window, slots):
            trace.idle_checked += 1
            trace.idle_over += slots - len(running) > math.floor(SHARE * slots)
        trace.lo_running.append(sum(j.req.client == "lo" for _, j in running))
    return trace


def traffic(rng: random.Random, steps: int, hi_until: int, mid: bool) -> tuple[list[Job], dict[str, float]]:
    """``hi`` (band 0) at random steps until ``hi_until``; ``lo`` (band 2) backlogged throughout; with
    ``mid``, band 1 at random steps."""
    bands = {"hi": 0.0, "lo": 2.0} | ({"mid": 1.0} if mid else {})
    jobs: list[Job] = []
    rid = 0
    for client, band in bands.items():
        if client == "hi":
            arrivals = sorted(rng.randrange(hi_until) for _ in range(rng.randint(hi_until // 4, hi_until)))
        elif client == "lo":  # 3 a step: more than 12 slots run (a job runs 4.5 steps on average)
            arrivals = [0] * 24 + [t for t in range(steps) for _ in range(3)]
        else:
            arrivals = sorted(rng.randrange(steps) for _ in range(rng.randint(10, 60)))
        for t in arrivals:
            jobs.append(Job(R(rid, client, rng.randint(1, 40)), rng.randint(1, 8), t, int(band)))
            rid += 1
    return jobs, bands


@pytest.mark.parametrize(("policy", "reserve_s"), [("dlpm_light", 20.0), ("dlpm", 20.0), ("dlpm_light", 0.0)],
                         ids=["dlpm_light", "dlpm", "negative-control-no-reserve"])
def test_later_bands_keep_out_of_the_reserve_and_band_0_does_not_wait_for_them(policy: str,
                                                                                  reserve_s: float) -> None:
    rng = random.Random(5)
    total = Trace()
    for _ in range(TRIALS):
        jobs, bands = traffic(rng, 300, 300, rng.random() < 0.5)
        trace = run(policy, jobs, rng.randint(2, 12), bands, 20.0, 300, reserve_s)
        for name in ("over_bound", "bound_checked", "waited", "within"):
            setattr(total, name, getattr(total, name) + getattr(trace, name))
    assert total.bound_checked > 20 * TRIALS and total.within > 20 * TRIALS  # the preconditions occur
    if reserve_s:
        assert total.over_bound == 0 and total.waited == 0
    else:  # without the reserve the later bands fill the worker, and band 0 waits for their finishes
        assert total.over_bound > total.bound_checked / 2 and total.waited > total.within / 10


@pytest.mark.parametrize("reserve_s", [20.0, 1e6], ids=["window-20", "negative-control-never-released"])
def test_the_reserve_is_released_when_band_0_goes_quiet(reserve_s: float) -> None:
    rng = random.Random(6)
    full = quiet_steps = 0
    for _ in range(TRIALS):
        slots, steps = rng.randint(2, 12), 300
        jobs, bands = traffic(rng, steps, 100, False)
        trace = run("dlpm_light", jobs, slots, bands, 20.0, steps, reserve_s)
        released = trace.last_hi + 20 + 2  # the window and the clock's step after the last finish
        late = trace.lo_running[released:]
        quiet_steps += len(late)
        full += sum(n == slots for n in late)
    assert quiet_steps > 100 * TRIALS  # the precondition: long quiet spells after band 0's last request
    if reserve_s < 1e6:
        assert full == quiet_steps  # the whole worker, every step
    else:
        assert full == 0


def spells(rng: random.Random, steps: int) -> tuple[list[Job], dict[str, float]]:
    """``hi`` in bursts of 1-4 requests, each after a quiet spell of 50-90 steps (longer than the
    policy's memory of a band's peak, one to two windows); ``lo`` backlogged throughout with long
    requests (10-30 steps), so that a slot seldom frees."""
    bands = {"hi": 0.0, "lo": 2.0}
    lo = [0] * 24 + list(range(steps))
    jobs = [Job(R(rid, "lo", rng.randint(1, 40)), rng.randint(10, 30), t, 2) for rid, t in enumerate(lo)]
    rid, t = len(jobs), rng.randint(50, 90)
    while t < steps:
        for _ in range(rng.randint(1, 4)):
            jobs.append(Job(R(rid, "hi", rng.randint(1, 40)), rng.randint(1, 8), t, 0))
            rid += 1
        t += rng.randint(50, 90)
    return jobs, bands


@pytest.mark.parametrize("floor", [1, 0], ids=["floor-1", "negative-control-no-floor"])
def test_a_standing_band_starts_at_once_after_a_quiet_spell(floor: int) -> None:
    """``hi`` is named before ``lo``, so it keeps a floor of reserve while quiet: the first request of a
    burst after a quiet spell longer than the window is admitted in the step it arrives, and ``lo`` runs
    on every slot but that floor (with the margin) meanwhile."""
    rng = random.Random(8)
    firsts = waited = quiet_steps = short = 0
    for _ in range(TRIALS):
        slots, steps = rng.randint(3, 12), 300
        jobs, bands = spells(rng, steps)
        trace = run("dlpm_light", jobs, slots, bands, 20.0, steps, 20.0, floor)
        hi = sorted((j for j in jobs if j.band == 0), key=lambda j: j.arrived)
        first = [j for k, j in enumerate(hi) if k == 0 or j.arrived - hi[k - 1].arrived >= 50]
        firsts += len(first)
        waited += sum(j.admitted != j.arrived for j in first)
        held = min(math.ceil(floor * 1.25), math.floor(SHARE * slots), slots - 1)
        hi_busy = {t for j in hi for t in range(j.arrived, j.admitted + j.steps + 42)}
        late = [n for t, n in enumerate(trace.lo_running) if t > 45 and t not in hi_busy]
        quiet_steps += len(late)
        short += sum(n != slots - held for n in late)
    assert firsts > 3 * TRIALS and quiet_steps > 50 * TRIALS  # the preconditions: quiet spells, then bursts
    assert short == 0  # lo has every slot but the floor while hi is quiet
    assert (waited == 0) if floor else (waited > firsts / 2)


def uncapped(self: Headroom, band: int, reserves: dict[int, int], most: int) -> int:
    """The slots held for the bands before ``band`` without the cap on their sum (a first version)."""
    return sum(max(0, r - self.running[b]) for b, r in reserves.items() if b < band)


@pytest.mark.parametrize("capped", [True, False], ids=["capped", "negative-control-reserves-summed"])
def test_several_earlier_bands_never_idle_more_than_one_reserve(capped: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Bands 0 and 1 both active: while band 2 waits, at most floor(share x C) slots are idle (their
    reserves together hold no more than one could), so band 2 always has the rest."""
    if not capped:
        monkeypatch.setattr(Headroom, "held", uncapped)
    rng = random.Random(7)
    total = Trace()
    for _ in range(TRIALS):
        jobs, bands = traffic(rng, 300, 300, True)
        trace = run("dlpm_light", jobs, rng.randint(2, 12), bands, 20.0, 300, 20.0)
        total.idle_over += trace.idle_over
        total.idle_checked += trace.idle_checked
    assert total.idle_checked > 20 * TRIALS  # the precondition: both earlier bands hold reserves
    assert (total.idle_over == 0) if capped else (total.idle_over > total.idle_checked / 10)


def test_the_reserve_knobs_are_validated() -> None:
    for bad in ({"band_reserve_s": -1.0}, {"band_reserve_share": 1.0}, {"band_reserve_share": -0.1},
                {"band_reserve_margin": -0.5}):
        with pytest.raises(ConfigError, match="band-reserve"):
            AdmissionConfig(**bad)  # type: ignore[arg-type]
