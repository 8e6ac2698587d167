"""Each SGLang worker measures its decode steps and reports the batch it runs usefully (``core/knee.py``),
with a fake scheduler and batches (no server)."""

from __future__ import annotations

import pytest
from test_chunk_sizer import Batch, Mode, Req, Scheduler

from sglang_fair.sglang_plugin import worker_hooks


def decode(n: int, launched: float, extend: bool = False) -> Batch:
    reqs = [Req(f"r{i}", list(range(90)), list(range(10))) for i in range(n)]
    return Batch(reqs, launch_ts=launched, forward_mode=Mode(extend))


def test_decode_steps_are_measured_and_prefill_steps_are_not() -> None:
    scheduler = Scheduler()
    now = 1000.0
    for i in range(64):  # 3 ms + 1 ms a request (100 KV tokens each): the knee 3 x 3 = 9
        n = 1 + i % 16
        worker_hooks.observe_step(scheduler, decode(n, now - (0.003 + 0.001 * n)), now)
        worker_hooks.observe_step(scheduler, decode(n, now - 5.0, extend=True), now)  # a prefill: not
    knee = worker_hooks.knee_of(scheduler)
    assert len(knee.steps) == 64 and knee.steps[0] == pytest.approx((1, 0.1, 0.004)) and knee.knee() == 9
    worker_hooks.observe_step(scheduler, decode(4, None), now)  # type: ignore[arg-type]  # never launched
    worker_hooks.observe_step(scheduler, Batch([], launch_ts=now - 1.0), now)  # empty
    assert len(knee.steps) == 64
