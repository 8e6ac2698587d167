"""Budgets (``edge/budgets.py``) as properties over randomized traffic, with time passed in: in every minute
a tenant is admitted at most its requests per minute, and at most its tokens per minute plus one request's
worth; a tenant under its budget is never refused; the Retry-After it is told is when it is admitted.
The negative control (no budget) breaks the bound on the same traffic, and the generated traffic does
reach the budget (refusals counted)."""

from __future__ import annotations

import random
from collections import deque

import pytest

from sglang_fair.edge.budgets import WINDOW_S, Budget, BudgetBook, OverBudget

TRIALS = 60


def traffic(rng: random.Random, rate_per_minute: float, seconds: float) -> list[tuple[float, int]]:
    """(arrival time, tokens) of a Poisson stream at ``rate_per_minute``."""
    now, out = rng.uniform(0, 5), []
    while now < seconds:
        out.append((now, rng.randint(1, 400)))
        now += rng.expovariate(rate_per_minute / 60.0)
    return out


def admitted_by(book: BudgetBook, arrivals: list[tuple[float, int]], tenant: str = "t"
                ) -> tuple[list[tuple[float, int]], int]:
    """The arrivals the book admitted (each charged its tokens at admission) and how many it refused."""
    kept, refused = [], 0
    for now, tokens in arrivals:
        try:
            book.admit(tenant, now, tokens)
        except OverBudget:
            refused += 1
            continue
        kept.append((now, tokens))
    return kept, refused


def worst_minute(kept: list[tuple[float, int]]) -> tuple[int, int]:
    """The most requests and the most tokens admitted in any window of :data:`WINDOW_S` seconds."""
    window: deque[tuple[float, int]] = deque()
    most_requests = most_tokens = tokens = 0
    for now, t in kept:
        window.append((now, t))
        tokens += t
        while window[0][0] <= now - WINDOW_S:
            tokens -= window.popleft()[1]
        most_requests, most_tokens = max(most_requests, len(window)), max(most_tokens, tokens)
    return most_requests, most_tokens


@pytest.mark.parametrize("bounded", [True, False], ids=["budget", "negative-control-no-budget"])
def test_no_minute_admits_more_than_the_budget(bounded: bool) -> None:
    rng = random.Random(7)
    violations = refusals = 0
    for _ in range(TRIALS):
        rpm, tpm = rng.randint(5, 120), rng.randint(2_000, 40_000)
        budget = Budget(rpm, tpm)
        book = BudgetBook({"t": budget} if bounded else {})
        arrivals = traffic(rng, rng.uniform(0.5, 4.0) * rpm, 240.0)
        kept, refused = admitted_by(book, arrivals)
        refusals += refused
        requests, tokens = worst_minute(kept)
        violations += requests > rpm or tokens > tpm + 400
    if bounded:
        assert violations == 0
        assert refusals > TRIALS  # the precondition: the traffic does reach its budget
    else:
        assert violations > TRIALS // 2  # the same traffic without a budget goes past it


def test_a_tenant_under_its_budget_is_never_refused() -> None:
    rng = random.Random(11)
    for _ in range(TRIALS):
        rpm = rng.randint(20, 200)
        arrivals = traffic(rng, rpm * 0.4, 300.0)  # well under, and no minute of it reaches rpm
        arrivals = [(t, 1) for t, _ in arrivals]
        if worst_minute(arrivals)[0] >= rpm:
            continue
        book = BudgetBook({"t": Budget(rpm, 0), "other": Budget(1, 0)})
        assert admitted_by(book, arrivals)[1] == 0
        assert admitted_by(book, [(0.0, 1), (1.0, 1)], "other")[1] == 1  # another tenant's own bound


def test_retry_after_is_when_the_tenant_is_admitted_again() -> None:
    rng = random.Random(3)
    for _ in range(TRIALS):
        book = BudgetBook({"t": Budget(rng.randint(1, 30), 0)})
        now = 0.0
        while True:
            now += rng.uniform(0.0, 3.0)
            try:
                book.admit("t", now)
            except OverBudget as err:
                retry = err.retry_after
                break
        with pytest.raises(OverBudget):
            book.check("t", now + retry - 1.0)
        book.check("t", now + retry)  # admitted at the time it was told


def test_tokens_charged_later_count_and_the_view_shows_what_is_left() -> None:
    book = BudgetBook({"t": Budget(0, 1000), "free": Budget()})
    book.admit("t", 0.0, tokens=300)
    book.charge("t", 1.0, tokens=700)  # its output, known at the finish
    with pytest.raises(OverBudget, match="1000 tokens per minute") as err:
        book.admit("t", 2.0)
    assert err.value.retry_after == 58  # the first 300 leave the minute at 60 s
    assert book.view(2.0) == {"t": {"requests_per_minute": 0, "tokens_per_minute": 1000, "requests_used": 1,
                                    "tokens_used": 1000, "requests_left": None, "tokens_left": 0}}
    book.admit("t", 60.0)
    assert not BudgetBook({"free": Budget()}).enabled  # a budget of zeros bounds nothing


def test_a_budget_refuses_negative_bounds() -> None:
    with pytest.raises(Exception, match="requests_per_minute must be >= 0"):
        Budget(-1, 0)
