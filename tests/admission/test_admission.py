"""Admission policies on hand-built inputs, down to the lines of the papers' algorithms."""

from __future__ import annotations

import pytest

from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.core.errors import ConfigError
from support import R, admission_order, arrive, policy, req, run_cluster


def Slots(n: int, max_len: int | None = None) -> SlotBudget:
    return SlotBudget(n, max_len)




def test_fcfs_and_lpm_orders() -> None:
    waiting = [R(1, "a", 10, 0, 0.0), R(2, "b", 10, 8, 1.0), R(3, "c", 10, 8, 2.0), R(4, "d", 10, 3, 3.0)]
    fcfs, lpm = policy("fcfs"), policy("lpm")
    arrive(fcfs, *waiting), arrive(lpm, *waiting)
    assert [r.rid for r in fcfs.select(waiting, Slots(4))] == [1, 2, 3, 4]
    assert [r.rid for r in lpm.select(waiting, Slots(4))] == [2, 3, 4, 1]


def test_lpm_skips_what_does_not_fit_and_keeps_going() -> None:
    lpm = policy("lpm")
    waiting = arrive(lpm, R(1, "a", 50, 40), R(2, "b", 5, 0))
    assert [r.rid for r in lpm.select(waiting, Slots(2, max_len=10))] == [2]


def test_lpm_keeps_exact_order_at_10000_waiting_requests() -> None:
    lpm = policy("lpm")
    waiting = arrive(lpm, *[R(i, f"c{i % 7}", 100, (i * 7919) % 100, float(i)) for i in range(10_000)])
    admitted = lpm.select(waiting, Slots(10_000))
    keys = [(-r.cached_len, r.arrival) for r in admitted]
    assert len(admitted) == 10_000 and keys == sorted(keys)


def test_charges_extend_once_and_output_per_token() -> None:
    p = policy("dlpm", quantum=100)
    [r] = arrive(p, R(1, "a", input_len=30, cached_len=10))
    assert p.select([r], Slots(1)) == [r]
    assert p.counter("a") == 100 - 20  # refilled once, charged w_e * extend
    p.on_output("a", 3)
    assert p.counter("a") == 80 - 6
    p.on_retract(r)
    assert p.select([r], Slots(1)) == [r]  # admitted again: not charged again
    assert p.counter("a") == 74
    p.on_finish(r)
    assert p.snapshot()["a"].service == 26


def test_vtc_picks_least_counter_and_stops_at_first_misfit() -> None:
    p = policy("vtc")
    waiting = arrive(p, R(1, "a", 5), R(2, "a", 5), R(3, "b", 50))
    p.counters["a"], p.counters["b"] = 10.0, 0.0
    assert p.select(waiting, Slots(3, max_len=10)) == []  # b is next and does not fit: stop
    assert [r.rid for r in p.select(waiting, Slots(3))] == [3, 1, 2]


def test_vtc_lift_to_min_of_queued_clients_or_kept_if_higher() -> None:
    p = policy("vtc")
    arrive(p, R(1, "a", 4), R(2, "b", 4))
    p.counters.update(a=50.0, b=30.0)
    arrive(p, R(3, "c", 4))
    assert p.counters["c"] == 30.0  # lifted to min(50, 30)
    p.counters["d"] = 99.0
    arrive(p, R(4, "d", 4))
    assert p.counters["d"] == 99.0  # kept: already higher
    arrive(p, R(5, "a", 4))
    assert p.counters["a"] == 50.0  # a still had a queued request: no lift


def test_vtc_lift_with_empty_queue_uses_client_that_left_last() -> None:
    p = policy("vtc")
    a, b = arrive(p, R(1, "a", 4), R(2, "b", 4))
    p.counters.update(a=7.0, b=3.0)
    p.select([a, b], Slots(2))  # b (3 + 4) then a (7 + 4): a left the queue last
    assert p.last_left == "a"
    arrive(p, R(3, "z", 4))
    assert p.counters["z"] == 11.0


def test_weighted_vtc_divides_costs_by_weight() -> None:
    p = policy("vtc", gold=2.0)
    g, s = arrive(p, R(1, "gold", 10, cached_len=4), R(2, "silver", 10))
    p.select([g, s], Slots(2))
    assert p.counters["gold"] == 5.0 and p.counters["silver"] == 10.0  # all input tokens count


def test_dlpm_counter_resets_when_client_rejoins() -> None:
    p = policy("dlpm", quantum=100)
    [r] = arrive(p, R(1, "a", 10))
    p.select([r], Slots(1))
    p.on_finish(r)
    assert p.counter("a") == 90
    arrive(p, R(2, "a", 10))
    assert p.counter("a") == 0  # line 12: q_i <- 0 for a client joining the list again


def test_dlpm_refills_only_when_no_queued_client_has_credit() -> None:
    p = policy("dlpm", quantum=10)
    a1, b1 = arrive(p, R(1, "a", 8, arrival=0), R(3, "b", 30, cached_len=5, arrival=2))
    # b's request has the longest prefix, so it is scanned first; nobody has credit: refill.
    assert [r.rid for r in p.select([a1, b1], Slots(1))] == [3]
    assert p.refills == 1 and p.counter("b") == 10 - 25 and p.counter("a") == 10
    big, b2 = arrive(p, R(4, "a", 50, arrival=3), R(5, "b", 3, arrival=4))
    # a still has credit but its request does not fit: b's fitting request must wait (line 5).
    assert p.select([a1, big, b2], Slots(5, max_len=10)) == [a1]
    assert p.select([big, b2], Slots(5, max_len=10)) == []
    assert p.refills == 1
    # a's big request fits now; then nobody queued has credit: refill until b's counter is positive.
    assert [r.rid for r in p.select([big, b2], Slots(5))] == [4, 5]
    assert p.refills == 3 and p.counter("a") == 2 - 50 + 20 and p.counter("b") == -15 + 20 - 3


def test_weighted_dlpm_refills_quantum_times_weight() -> None:
    p = policy("dlpm", quantum=10, gold=3.0)
    g, s = arrive(p, R(1, "gold", 1), R(2, "silver", 1))
    p.select([g, s], Slots(2))
    assert p.counter("gold") == 30 - 1 and p.counter("silver") == 10 - 1


def test_bad_request_lengths_are_rejected() -> None:
    p = policy("dlpm")
    with pytest.raises(ConfigError, match="negative input"):
        p.on_arrival(R(1, "a", -3))
    bad = R(2, "a", 5, cached_len=9)
    p.on_arrival(bad)
    with pytest.raises(ConfigError, match="cached prefix"):
        p.select([bad], Slots(1))


# ---- the story of Fig. 2 of 000: a client with many shared-prefix requests and a light client ----
def fig2_requests() -> list:  # type: ignore[type-arg]
    prefix = list(range(100, 164))
    heavy = [req(i, "heavy", prefix + [1000 + i] * 4, output_len=2) for i in range(8)]
    light = [req(100 + i, "light", [2000 + 68 * i + j for j in range(68)], output_len=2) for i in range(4)]
    return heavy + light


def runs_while_light_waits(order: list[str]) -> list[int]:
    light_left, runs, run = order.count("light"), [], 0
    for c in order:
        if c == "heavy":
            run += 1
        else:
            runs.append(run) if run else None
            run, light_left = 0, light_left - 1
        if light_left == 0:
            break
    return runs


def test_fig2_lpm_starves_vtc_alternates_dlpm_bounds_runs() -> None:
    common = {"capacity": 600, "max_running": 1}
    lpm, _ = run_cluster(fig2_requests(), policy="lpm", **common)
    vtc, _ = run_cluster(fig2_requests(), policy="vtc", **common)
    dlpm, _ = run_cluster(fig2_requests(), policy="dlpm", quantum=40, **common)
    lpm_order, vtc_order, dlpm_order = map(admission_order, (lpm, vtc, dlpm))
    assert lpm_order == ["heavy"] * 8 + ["light"] * 4  # the light client waits for all of heavy
    assert vtc_order[:8] == ["heavy", "light"] * 4  # strict alternation while both wait
    # DLPM: heavy requests after the first cost 4 + 2*2 = 8 each, so a quantum of 40 buys runs of
    # about 40 / 8 + 1 = 6; the light client is served between runs, never after all of heavy.
    runs = runs_while_light_waits(dlpm_order)
    assert max(runs) <= 6 and any(r >= 2 for r in runs)
    assert dlpm_order.index("light") < 8
    hits = {n: sum(r.cached_len for r in c.records.values()) for n, c in
            (("lpm", lpm), ("vtc", vtc), ("dlpm", dlpm))}
    assert hits["dlpm"] >= hits["vtc"]
