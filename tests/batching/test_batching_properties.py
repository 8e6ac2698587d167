"""Properties of every batching policy over randomized steps: valid plans (no request twice, chunks
within what is left), the token budget, and liveness: every running decode eventually runs, and once
its next token is past due ([3]'s envelope) it waits only a few steps. FairBatching may rightly defer
a decode that is far ahead of its envelope for many steps, so liveness counts overdue steps. The
property has a negative control: SGLang's prefill-first rule starves decodes while prefills keep
coming, so it must fail there."""

from __future__ import annotations

import pytest
from batching_support import Stepper, policy
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.batching import BATCHING_POLICIES

PROPERTY = settings(max_examples=15, deadline=None)
MAX_OVERDUE = 10  # steps a decode may wait once past due (steps here take 10-50 ms)


@pytest.mark.parametrize("name", BATCHING_POLICIES.names())
@PROPERTY
@given(seed=st.integers(0, 2**32 - 1))
def test_plans_are_valid_and_within_the_token_budget(name: str, seed: int) -> None:
    run = Stepper(policy(name, token_budget=256), seed)
    run.run(steps=150, max_decodes=200 if name != "sarathi" else 128)  # sarathi: decodes <= budget
    assert run.over_budget == 0


@pytest.mark.parametrize("name", ["sarathi", "fairbatching", "slai"])
@PROPERTY
@given(seed=st.integers(0, 2**32 - 1))
def test_every_running_decode_eventually_runs(name: str, seed: int) -> None:
    run = Stepper(policy(name, token_budget=256), seed, keep_prefilling=True)
    run.run(steps=200, max_decodes=64)
    assert run.max_wait, "the run had no decodes: the property says nothing"
    assert run.max_overdue <= MAX_OVERDUE


@PROPERTY
@given(seed=st.integers(0, 2**32 - 1))
def test_negative_control_sglang_starves_decodes_under_a_prefill_stream(seed: int) -> None:
    run = Stepper(policy("sglang", token_budget=256), seed, keep_prefilling=True)
    run.run(steps=200, max_decodes=64)
    assert run.max_overdue > MAX_OVERDUE
