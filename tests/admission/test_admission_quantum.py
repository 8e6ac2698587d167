"""Q^u as time (admission/quantum.py): the service meter and the quantum it gives, on hand-built clocks."""

from __future__ import annotations

import pytest

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.admission.quantum import Quantum, ServiceMeter
from support import R, arrive


def test_meter_measures_service_per_busy_second_from_its_first_sample() -> None:
    meter = ServiceMeter(tau=10.0, sample=1.0)
    meter.tick(100.0, 0.0, True)
    meter.tick(100.5, 400.0, True)
    assert meter.rate == 0.0  # half a second: no sample yet
    meter.tick(101.0, 1000.0, True)
    assert meter.rate == pytest.approx(1000.0)  # bias-corrected: the first sample counts in full


def test_meter_leaves_idle_time_out() -> None:
    meter = ServiceMeter(tau=10.0, sample=1.0)
    meter.tick(0.0, 0.0, True)
    meter.tick(1.0, 500.0, False)  # busy until now, idle from now on
    meter.tick(60.0, 500.0, True)  # a minute idle: not a sample
    meter.tick(61.0, 1000.0, True)
    assert meter.rate == pytest.approx(500.0)


def test_meter_follows_a_change_of_speed_over_its_time_constant() -> None:
    meter = ServiceMeter(tau=10.0, sample=1.0)
    served, now = 0.0, 0.0
    meter.tick(now, served, True)
    for _ in range(30):
        now, served = now + 1.0, served + 100.0
        meter.tick(now, served, True)
    for _ in range(30):
        now, served = now + 1.0, served + 1000.0
        meter.tick(now, served, True)
    assert 900.0 < meter.rate < 1000.0  # three time constants after the change


def test_meter_ignores_a_clock_that_does_not_move_and_any_origin() -> None:
    for origin in (0.0, 1e6):  # a machine booted a minute ago, or long ago
        meter = ServiceMeter(tau=10.0, sample=1.0)
        meter.tick(origin, 0.0, True)
        meter.tick(origin, 50.0, True)
        meter.tick(origin + 2.0, 400.0, True)
        assert meter.rate == pytest.approx(200.0)


def test_quantum_in_seconds_is_never_below_the_largest_recent_request() -> None:
    q = Quantum(tokens=0.0, seconds=0.25)
    assert q.timed and q.value() == 1.0
    q.note_admission(300.0)
    assert q.value() == 300.0  # no rate yet: one request
    q.meter.tick(0.0, 0.0, True)
    q.meter.tick(1.0, 4000.0, True)
    assert q.value() == 1000.0  # 0.25 s x 4,000 units/s
    assert Quantum(tokens=64.0, seconds=0.25).value() == 64.0  # units override seconds


def test_dlpm_light_defaults_to_a_quarter_second_and_dlpm_to_units() -> None:
    light = make_admission_policy(AdmissionConfig(policy="dlpm_light"))
    dlpm = make_admission_policy(AdmissionConfig(policy="dlpm"))
    assert light._quantum.timed and light._quantum.seconds == 0.25
    assert not dlpm._quantum.timed and dlpm.quantum == 4096.0
    timed_dlpm = make_admission_policy(AdmissionConfig(policy="dlpm", quantum_s=1.0))
    assert timed_dlpm._quantum.timed and timed_dlpm._quantum.seconds == 1.0
    fixed_light = make_admission_policy(AdmissionConfig(policy="dlpm_light", quantum=500.0))
    assert fixed_light.quantum == 500.0


def test_policy_measures_its_worker_from_the_hosts_ticks() -> None:
    p = make_admission_policy(AdmissionConfig(policy="dlpm_light"))
    p.tick(50.0)  # idle: nothing to measure
    [r] = arrive(p, R(1, "a", 200))
    p.tick(51.0)
    p.select([r], SlotBudget(1))  # charged 200 at admission
    p.on_output("a", 150)  # charged 300
    p.tick(53.0)
    assert p.service_rate == pytest.approx(250.0)  # 500 units over the 2 busy seconds
    assert p.quantum == 200.0  # 0.25 s x 250 = 62.5 < the request's 200


def test_negative_quantum_seconds_is_refused() -> None:
    with pytest.raises(Exception, match="fair-quantum-s"):
        AdmissionConfig(quantum_s=-1.0)


def _rounds_between_big_admissions(forget_per_admission: bool) -> list[int]:
    """dlpm_light (Q^u in seconds, no ticks: the largest recent request) serving one slot at a time to a
    client of 380-token requests beside two of 170: the refills between the big client's admissions."""
    p = make_admission_policy(AdmissionConfig(policy="dlpm_light"))
    if forget_per_admission:  # the earlier memory: faded by 0.98 per admission, not per round
        note = p._quantum.note_admission
        p._quantum.note_round = lambda: None  # type: ignore[method-assign]

        def fading(cost: float, q: Quantum = p._quantum) -> None:
            q.largest *= 0.98
            note(cost)
        p._quantum.note_admission = fading  # type: ignore[method-assign]
    sizes = {"big": 380, "s1": 170, "s2": 170}
    waiting = arrive(p, *(R(i * 3 + k, c, n) for i in range(40) for k, (c, n) in enumerate(sizes.items())))
    gaps, last = [], None
    for _ in range(90):
        [r] = p.select(waiting, SlotBudget(1))
        waiting.remove(r)
        p.on_finish(r)
        if r.client == "big":
            if last is not None:
                gaps.append(p.refills - last)
            last = p.refills
    return gaps


def test_a_client_of_the_largest_requests_is_served_every_round() -> None:
    gaps = _rounds_between_big_admissions(forget_per_admission=False)
    assert len(gaps) >= 10 and max(gaps) == 1
    # negative control: a memory that fades per admission leaves Q^u below its request: two rounds
    assert max(_rounds_between_big_admissions(forget_per_admission=True)) >= 2
