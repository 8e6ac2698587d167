"""dlpm_light's third change: a due refill waits briefly for a returning client (admission/returns.py)."""

from __future__ import annotations

from typing import Any

import pytest

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.admission.dlpm_light import DLPMLight
from sglang_fair.admission.returns import Returns
from support import R, arrive


@pytest.mark.parametrize("origin", [0.0, 1e6])  # a machine booted a minute ago, or long ago
def test_arrivals_answer_finishes_in_order_and_measure_the_return(origin: float) -> None:
    r = Returns(longest=0.25)
    r.finished("a", origin + 1.0)
    r.arrived("a", origin + 1.1)
    r.arrived("a", origin + 1.2)  # answers no finish
    assert r.gap["a"] == pytest.approx(0.1) and r.wait("a") == pytest.approx(0.2)
    r.finished("a", origin + 2.0)
    r.finished("a", origin + 2.15)
    assert r.awaited(origin + 2.1, ["a"])
    assert r.awaited(origin + 2.3, ["a"])  # the second finish's return is still due
    assert not r.awaited(origin + 2.4, ["a"])  # both past their wait: dropped, went elsewhere
    r.arrived("a", origin + 2.5)
    assert r.gap["a"] == pytest.approx(0.1)  # nothing was owed: no return measured
    r.finished("a", origin + 3.0)
    r.arrived("a", origin + 4.5)  # 1.5 s: the client was thinking, not coming back
    assert r.gap["a"] == pytest.approx(0.1)
    r.finished("b", origin)
    assert r.wait("b") == 0.0 and not r.awaited(origin, ["b"])  # never measured: never awaited


def test_the_wait_is_never_longer_than_the_longest_return() -> None:
    r = Returns(longest=0.25)
    r.finished("a", 0.0)
    r.arrived("a", 0.2)
    assert r.wait("a") == 0.25


def test_a_client_that_stops_sending_holds_only_the_finishes_of_the_longest_return() -> None:
    r = Returns(longest=0.25)
    for i in range(1000):  # 100 finishes a second, never answered: an open-loop client that stopped
        r.finished("a", i * 0.01)
    assert len(r.unanswered["a"]) == 25
    r.finished("a", 15.0)  # back after a pause: its next arrival answers this finish, not one of seconds ago
    r.arrived("a", 15.1)
    assert r.gap["a"] == pytest.approx(0.1)


def _waiting_b(policy: str, done: tuple[str, ...] = ()) -> tuple[Any, R, list[R]]:
    """a (credit left, a request just finished at t = 2.0, its returns measured at 0.1 s, two more
    running) and b (in debt, one request waiting, two running), but the running requests of the clients
    in ``done`` finished too; c, in debt, has nothing in flight."""
    p = make_admission_policy(AdmissionConfig(policy=policy, quantum=1000.0))
    p.tick(0.0)
    first = arrive(p, R(1, "a", 100), R(2, "a", 100), R(3, "a", 100), R(4, "b", 100), R(5, "b", 100),
                   R(8, "c", 100))
    assert p.select(first, SlotBudget(6)) == first
    a1, a2, a3, b1, b2, c1 = first
    p.on_output("b", 500)  # b: 800 - 1,000 = -200
    p.on_output("c", 600)  # c: 900 - 1,200 = -300
    p.on_finish(c1)
    p.tick(1.0)
    p.on_finish(a1)
    p.tick(1.1)
    [a4] = arrive(p, R(6, "a", 100))  # back 0.1 s after its finish
    assert p.select([a4], SlotBudget(1)) == [a4]
    p.tick(2.0)
    p.on_finish(a2)
    running = [r for r in (a3, a4, b1, b2) if r.client not in done]
    for r in (a3, a4, b1, b2):
        if r.client in done:
            p.on_finish(r)
    [b3] = arrive(p, R(7, "b", 100))
    return p, b3, running


def test_a_due_refill_waits_for_a_client_about_to_return_then_goes_on() -> None:
    p, b3, _ = _waiting_b("dlpm_light")
    p.tick(2.05)
    assert p.select([b3], SlotBudget(1)) == [] and p.waits == 1  # a is due back by 2.2
    p.tick(2.3)
    assert p.select([b3], SlotBudget(1)) == [b3]  # a did not come: the refill goes on


def test_a_round_waits_at_most_the_quantum_seconds() -> None:
    p, b3, (a3, *_) = _waiting_b("dlpm_light")
    for t in (2.05, 2.15, 2.25):
        p.tick(t)
        if t == 2.15:
            p.on_finish(a3)  # another of a's requests finishes: its return is awaited too
        assert p.select([b3], SlotBudget(1)) == []
    p.tick(2.3)
    assert p.returns.awaited(2.3, ["a"])  # a's finish at 2.15 is still due back ...
    assert p.select([b3], SlotBudget(1)) == [b3]  # ... but this round has waited 0.25 s


@pytest.mark.parametrize("counted_from_first", [False, True])
def test_a_rounds_waits_add_up_to_the_quantum_seconds(counted_from_first: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait ends at the admission that answers it; the next gap of the same round may wait again. The
    negative control counts the round's budget from its first wait, the time between waits included."""
    if counted_from_first:
        monkeypatch.setattr(DLPMLight, "_end_wait", lambda self: None)
    p, b3, (a3, *_) = _waiting_b("dlpm_light")
    p.tick(2.05)
    assert p.select([b3], SlotBudget(1)) == []  # a is due back
    p.tick(2.1)
    [a5] = arrive(p, R(11, "a", 100))
    assert p.select([a5, b3], SlotBudget(1)) == [a5]  # a is back, with credit: the wait took 0.05 s
    p.tick(2.4)
    p.on_finish(a3)
    p.tick(2.45)
    waited = p.select([b3], SlotBudget(1)) == []
    assert waited != counted_from_first  # 0.05 s of 0.25 waited so far, not 0.4
    assert p.waited == pytest.approx(0.05 if not counted_from_first else 0.0)


def test_a_light_clients_request_is_not_held_back() -> None:
    p, b3, _ = _waiting_b("dlpm_light")
    b4, c2 = arrive(p, R(9, "b", 100), R(10, "c", 100))  # c: one in flight, b four: c is light
    p.tick(2.05)
    assert p.light_clients() == {"c"}
    assert p.select([b3, b4, c2], SlotBudget(1)) == [c2] and p.waits == 0


@pytest.mark.parametrize(("policy", "done"), [
    ("dlpm", ()),  # negative control: Algorithm 1 refills at once
    ("dlpm_light", ("a",)),  # a has nothing running here: a client of one request at a time
    ("dlpm_light", ("a", "b")),  # nothing runs: no next step would come
])
def test_no_wait_in_dlpm_as_written_for_an_idle_client_or_on_an_idle_worker(policy: str,
                                                                            done: tuple[str, ...]) -> None:
    p, b3, _ = _waiting_b(policy, done)
    p.tick(2.05)
    assert p.select([b3], SlotBudget(1)) == [b3]
