"""The bands' prefill pace (``admission/pace.py``) as properties over randomized traffic on a timed step
loop: a step that admits requests is a prefill step of ``TOKEN_S`` seconds per extend token (nothing
decodes in it, as in SGLang without mixed chunked prefill), any other step decodes every running request
for ``DECODE_S``; the clock ticks at every step. Band 0 is ``hi`` (Poisson arrivals, sometimes quiet for
a while), band 2 is ``lo``, which keeps more requests waiting than the worker runs.

- the bound: over every interval of steps during which band 0 had a request in flight at each admission,
  the time of the later bands' prefills (their share of each step's extend tokens) is at most
  f / (1 - f) x the interval's length plus one later-band prefill (the longest);
- one a step: while band 0 is in flight, no step admits more than one later-band request;
- no starvation: while band 0 is in flight and ``lo`` waits with a slot free, ``lo`` is admitted again
  within (its last prefill) x (1 - f) / f plus a step;
- nothing is paced while band 0 has nothing in flight.

Negative controls: no pacing (``band_prefill_share`` 1) breaks the bound and the one-a-step rule; a pace
whose debt is never paid back starves ``lo``. Each property shows its precondition occurring.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.admission.pace import PrefillPace
from sglang_fair.core.errors import ConfigError
from support import R

TOKEN_S, DECODE_S = 1e-4, 0.02
TRIALS = 12
CLIENT = {0: "hi", 2: "lo"}


@dataclass
class Step:
    start: float
    duration: float
    later_s: float  # the later bands' share of a prefill step's time
    later_n: int  # later-band requests admitted
    gated: bool  # band 0 had a request in flight at the admission
    lo_waits_with_room: bool


@dataclass
class Trace:
    steps: list[Step] = field(default_factory=list)


def run(rng: random.Random, share: float, slots: int, duration: float) -> Trace:
    p = make_admission_policy(AdmissionConfig("dlpm_light", client_bands={"hi": 0.0, "lo": 2.0},
                                              band_reserve_s=5.0, band_reserve_share=0.0,
                                              band_prefill_share=share))
    rid, clock, trace = 0, 0.0, Trace()
    waiting: list[R] = []
    left: dict[int, int] = {}  # rid -> decode steps left
    band: dict[int, int] = {}
    next_hi = rng.expovariate(2.0)
    while clock < duration:
        while next_hi <= clock:
            waiting.append(R(rid, "hi", rng.randint(50, 600), arrival=next_hi))
            p.on_arrival(waiting[-1])
            left[rid], band[rid], rid = rng.randint(5, 40), 0, rid + 1
            next_hi += rng.expovariate(2.0) if rng.random() < 0.9 else rng.uniform(5, 15)  # quiet spells
        while sum(band[r.rid] == 2 for r in waiting) < slots:
            waiting.append(R(rid, "lo", rng.randint(200, 3000), arrival=clock))
            p.on_arrival(waiting[-1])
            left[rid], band[rid], rid = rng.randint(5, 60), 2, rid + 1
        p.tick(clock)
        running = [r for r in left if r not in {w.rid for w in waiting}]
        gated = any(band[r] == 0 for r in running) or any(r.client == "hi" for r in waiting)
        room = slots - len(running)
        admitted = p.select(list(waiting), SlotBudget(room))
        for req in admitted:
            waiting.remove(req)
        later = [r for r in admitted if band[r.rid] == 2]
        if admitted:
            dur = TOKEN_S * sum(r.input_len for r in admitted)
            later_s = TOKEN_S * sum(r.input_len for r in later)
        else:
            dur, later_s = DECODE_S, 0.0
            for r in running:
                left[r] -= 1
                p.on_output(CLIENT[band[r]], 1)
        lo_waits = any(r.client == "lo" for r in waiting) and room > len(admitted)
        trace.steps.append(Step(clock, dur, later_s, len(later), gated, lo_waits))
        clock += dur
        for r in [r for r in running if left[r] <= 0]:
            del left[r]
            p.on_finish(R(r, CLIENT[band[r]], 0))
    return trace


def gated_runs(trace: Trace) -> list[list[Step]]:
    runs: list[list[Step]] = []
    for prev, step in zip([None, *trace.steps], trace.steps, strict=False):
        if step.gated:
            if prev is None or not prev.gated:
                runs.append([])
            runs[-1].append(step)
    return runs


def worst_excess(steps: list[Step], rate: float) -> float:
    """The most, over the intervals of ``steps``, of the later bands' prefill time past ``rate`` x the
    interval's length (Kadane's scan)."""
    best = running = -float("inf")
    for s in steps:
        running = s.later_s - rate * s.duration + max(0.0, running)
        best = max(best, running)
    return best


def trials(share: float) -> list[Trace]:
    rng = random.Random(11)
    return [run(rng, share, rng.randint(4, 16), 60.0) for _ in range(TRIALS)]


@pytest.mark.parametrize("share", [0.1, 0.3, 1.0], ids=["f-0.1", "f-0.3", "negative-control-no-pace"])
def test_later_bands_prefill_at_most_their_share_while_band_0_is_in_flight(share: float) -> None:
    checked = over = several = later_steps = 0
    rate = share / (1 - share) if share < 1 else 0.1 / 0.9  # the control is judged by f = 0.1's bound
    for trace in trials(share):
        longest = max((s.later_s for s in trace.steps), default=0.0)
        for run_ in gated_runs(trace):
            checked += 1
            over += worst_excess(run_, rate) > longest + 1e-9
            several += sum(s.later_n > 1 for s in run_)
            later_steps += sum(s.later_n > 0 for s in run_)
    assert checked > 2 * TRIALS and later_steps > 10 * TRIALS  # the precondition: paced stretches
    if share < 1:
        assert over == 0 and several == 0
    else:
        assert over > checked / 10 and several > later_steps / 10


def longest_starve(trace: Trace, share: float) -> tuple[float, int]:
    """The longest time ``lo`` waited with a slot free while band 0 was in flight, past what the pace
    allows after the later-band prefill before it; and how many such waits there were."""
    worst, waits, last_prefill, since = 0.0, 0, 0.0, None
    for s in trace.steps:
        if s.later_n:
            if since is not None:
                allowed = last_prefill * (1 - share) / share + 2 * max(DECODE_S, last_prefill)
                worst = max(worst, s.start - since - allowed)
                waits += 1
            last_prefill, since = s.later_s, None
        elif s.gated and s.lo_waits_with_room and since is None:
            since = s.start
        elif not s.gated:
            since = None
    return worst, waits


@pytest.mark.parametrize("paid_back", [True, False], ids=["paid-back", "negative-control-never-paid"])
def test_lo_is_slowed_not_starved(paid_back: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not paid_back:
        monkeypatch.setattr(PrefillPace, "tick", never_paid)
    worst, waits = 0.0, 0
    for trace in trials(0.2):
        w, n = longest_starve(trace, 0.2)
        worst, waits = max(worst, w), waits + n
    assert waits > 10 * TRIALS  # the precondition: lo held back while band 0 runs, then admitted
    assert (worst <= 1e-9) if paid_back else (worst > 1.0)


def never_paid(self: PrefillPace, now: float) -> None:
    if self.step is not None:
        at, later, total = self.step
        self.debt += max(now - at, 1e-3) * later / max(total, 1)
        self.step = None
    self.last = now


def test_nothing_is_paced_while_band_0_is_quiet() -> None:
    quiet_later = quiet_steps = 0
    for trace in trials(0.1):
        quiet = [s for s in trace.steps if not s.gated and s.later_n]
        quiet_steps += len(quiet)
        quiet_later += sum(s.later_n > 1 for s in quiet)
    assert quiet_steps > 5 * TRIALS and quiet_later > 0  # several a step again once band 0 is quiet


def test_the_pace_is_validated() -> None:
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ConfigError, match="band-prefill-share"):
            AdmissionConfig(band_prefill_share=bad)
