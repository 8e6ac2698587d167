"""Preble's priority wait queue (admission/preble.py) on hand-built inputs."""

from __future__ import annotations

from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.admission.preble import GROUPS, PER_LEVEL, PrebleQueue, priority_group
from support import R, arrive, policy


def test_groups_by_hit_ratio() -> None:
    ratios = {0: 0, 1: 0, 10: 0, 11: 1, 50: 4, 51: 5, 90: 8, 91: 9, 100: 9}
    for cached, group in ratios.items():
        assert priority_group(R(0, "a", 100, cached)) == group, cached
    assert priority_group(R(0, "a", 0, 0)) == 0


def test_groups_take_turns_from_the_highest_down_with_quotas() -> None:
    pq = policy("preble")
    assert isinstance(pq, PrebleQueue)
    hot = [R(i, "a", 100, 95, float(i)) for i in range(150)]  # group 9: quota 100
    cold = [R(1000 + i, "b", 100, 0, 1000.0 + i) for i in range(30)]  # group 0: quota 10
    mid = [R(2000 + i, "c", 100, 45, 2000.0 + i) for i in range(60)]  # group 4: quota 50
    waiting = arrive(pq, *cold, *mid, *hot)  # arrival order inside a group, not list order
    got = pq.select(waiting, SlotBudget(1000))
    assert [r.rid for r in got] == list(range(100))  # group 9 first, its quota, oldest first
    waiting = [r for r in waiting if r not in got]
    got = pq.select(waiting, SlotBudget(1000))
    assert [r.rid for r in got] == [2000 + i for i in range(50)]  # then group 4 (8..5 are empty)
    waiting = [r for r in waiting if r not in got]
    got = pq.select(waiting, SlotBudget(1000))
    assert [r.rid for r in got] == [1000 + i for i in range(10)]  # then group 0: 10, no starvation
    waiting = [r for r in waiting if r not in got]
    got = pq.select(waiting, SlotBudget(1000))
    assert [r.rid for r in got] == list(range(100, 150))  # the cycle restarts at group 9
    assert (GROUPS, PER_LEVEL) == (10, 10)


def test_lpm_would_starve_what_the_priority_queue_serves() -> None:
    """Negative control: under LPM an uncached request waits while cached ones keep coming."""
    for name, served in (("lpm", False), ("preble", True)):
        p = policy(name)
        waiting = arrive(p, R(0, "cold", 100, 0, 0.0))
        admitted_cold = False
        for step in range(12):
            waiting += arrive(p, R(10 + step, "hot", 100, 99, 1.0 + step))
            got = p.select(waiting, SlotBudget(1))
            waiting = [r for r in waiting if r not in got]
            admitted_cold |= any(r.client == "cold" for r in got)
        assert admitted_cold == served, name


def test_group_is_kept_while_waiting_and_reset_by_retraction() -> None:
    pq = policy("preble")
    assert isinstance(pq, PrebleQueue)
    a = R(1, "a", 100, 0, 0.0)
    b = R(2, "b", 100, 95, 1.0)
    waiting = arrive(pq, a, b)
    got = pq.select(waiting, SlotBudget(1))  # group 9 first
    assert got == [b] and pq.groups == {1: 0}
    a.cached_len = 95  # its prefix got cached meanwhile: Preble keeps it in group 0
    assert pq.select([a], SlotBudget(0)) == [] and pq.groups[1] == 0
    got = pq.select([a], SlotBudget(1))
    assert got == [a] and pq.groups == {}
    pq.on_retract(a)  # back to the queue: placed again by its hit ratio now
    assert pq.select([a], SlotBudget(0)) == [] and pq.groups[1] == 9


def test_skips_what_does_not_fit_and_charges_extend() -> None:
    pq = policy("preble")
    big, small = R(1, "a", 50, 45, 0.0), R(2, "b", 10, 9, 1.0)  # both 90% cached: group 8
    waiting = arrive(pq, big, small)
    got = pq.select(waiting, SlotBudget(2, max_input=10))
    assert got == [small]  # the older one does not fit: skipped, the next one is tried
    assert pq.book.service["b"] == 1.0  # w_e * (10 - 9)
