"""The batch a worker runs usefully (core/knee.py): fitted from measured decode steps, told only when the
steps can tell it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_fair.core.knee import KNEE_MIN_STEPS, BatchKnee
from sglang_fair.sim.steptime import FITTED, StepShape, preset

CPU = FITTED["cpu-tiny-llama"][0]
A100 = preset("a100-llama8b")[0]


def decode_steps(model: object, sizes: list[int], context_per_request: int) -> BatchKnee:
    knee = BatchKnee()
    for n in sizes:
        shape = StepShape(requests=n, new_tokens=n, context_tokens=n * context_per_request)
        knee.observe(n, shape.context_tokens, model.step_time(shape))  # type: ignore[attr-defined]
    return knee


def throughput(model: object, n: int, context_per_request: int) -> float:
    shape = StepShape(requests=n, new_tokens=n, context_tokens=n * context_per_request)
    return n / model.step_time(shape)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("model", "low", "high"), [(CPU, 6, 16), (A100, 80, 200)])
def test_the_knee_of_a_measured_worker_is_where_its_throughput_reaches_three_quarters(
        model: object, low: int, high: int) -> None:
    """The CPU engine's preset at 1,300 tokens of context a request: about ten; the A100's: about 120."""
    knee = decode_steps(model, [1 + i % 48 for i in range(200)], 1300).knee()
    assert low <= knee <= high
    best = throughput(model, 10**12, 1300)  # its asymptote
    assert throughput(model, knee, 1300) >= 0.75 * best > throughput(model, knee - 1, 1300)


def test_the_steps_tell_nothing_until_they_are_many_and_of_sizes_apart() -> None:
    assert decode_steps(CPU, [1 + i % 48 for i in range(KNEE_MIN_STEPS - 1)], 1300).knee() == 0
    assert decode_steps(CPU, [17 + i % 16 for i in range(300)], 1300).knee() == 0  # 17-32: within 2x
    flat = BatchKnee()
    for i in range(100):  # a step's time does not grow with the batch: no knee
        flat.observe(1 + i % 20, 1000 * (1 + i % 20), 0.01)
    assert flat.knee() == 0


def test_the_last_knee_told_stays_while_later_steps_cannot_tell() -> None:
    knee = decode_steps(CPU, [1 + i % 48 for i in range(200)], 1300)
    told = knee.knee()
    for _ in range(600):  # held at its cap since: the window's sizes within 2x
        knee.observe(32, 32 * 1300, CPU.step_time(StepShape(32, 32, 32 * 1300)))
    assert knee.fit() is None and knee.knee() == told > 0


@settings(max_examples=60, deadline=None)
@given(fixed=st.floats(1e-3, 5e-2), ratio=st.floats(0.5, 60.0), context_share=st.floats(0.0, 0.9),
       context=st.integers(100, 8000), seed=st.integers(0, 1000))
def test_the_knee_holds_three_quarters_of_the_largest_throughput_under_noise(
        fixed: float, ratio: float, context_share: float, context: int, seed: int) -> None:
    """Any linear step time whose fixed part is ``ratio`` requests' worth (a knee within a few times the
    64 requests the steps run), measured with 5% noise and contexts that vary per step: the throughput
    within a request of the knee told is 0.70-0.80 of the asymptote (0.75 exactly without noise)."""
    slope = fixed / ratio  # per request, of which context_share is its KV
    per_request, per_token = slope * (1 - context_share), slope * context_share / context
    rng = random.Random(seed)
    knee = BatchKnee()
    for _ in range(400):
        n = rng.randint(1, 64)
        ctx = n * int(context * rng.uniform(0.7, 1.3))
        knee.observe(n, ctx, (fixed + per_request * n + per_token * ctx) * rng.uniform(0.95, 1.05))
    n_star = knee.knee()
    def share(n: int) -> float:  # n / t(n) over 1 / slope
        return n / (ratio + n)

    assert share(n_star + 1) >= 0.70 and share(n_star - 1) <= 0.80  # within a request: noise, rounding


def test_a_host_that_asks_every_step_gets_a_fit_every_refit_steps() -> None:
    knee = BatchKnee(refit_every=16)
    for i in range(40):
        knee.observe(1 + i % 40, 1300 * (1 + i % 40), CPU.step_time(StepShape(1 + i % 40, 1 + i % 40, 0)))
    told = knee.knee()
    assert told > 0
    for i in range(16):  # another worker's steps now (a longer fixed part): fitted again at the 16th
        assert knee.knee() == told
        knee.observe(1 + i, 0, 0.1 + 1e-4 * (1 + i))
    assert knee.knee() > told


def test_bad_settings_are_refused() -> None:
    from sglang_fair.core.errors import ConfigError

    with pytest.raises(ConfigError):
        BatchKnee(share=1.0)
    with pytest.raises(ConfigError):
        BatchKnee(window=4)
    with pytest.raises(ConfigError):
        BatchKnee(refit_every=0)
