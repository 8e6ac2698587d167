"""FairBatching's prefill admission budget (PAB), reported by each SGLang worker to the router
(``serve --load-balance-method pab``).

After a forward batch (at most once per ``every`` seconds) the scheduler computes the budget with
:func:`~sglang_fair.batching.pab.prefill_admission_budget`, the code the simulated workers report
from, over what it holds: its running requests as decodes with their SLOs and token times, SGLang's
chunked request, and the prompt tokens of its waiting queue. The step-time model is the chunk
sizer's (``--batch-policy fairbatching`` with interleaved decodes, ``chunk_sizer.py``) or, without
it, this reporter's own :class:`ChunkSizer`, fed the same batches. The heartbeat thread sends the
latest value (``Heartbeat.prefill_budget``); the router's ``pab`` policy replaces its view with it.

A request dispatched by the router but not yet polled by the worker is missing from a report taken
before it arrived: the router's view then forgets its decrement one heartbeat early.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from sglang_fair.batching import BatchingConfig
from sglang_fair.sglang_plugin.chunk_sizer import ChunkSizer

REPORTER_ATTR = "_sglang_fair_pab_reporter"
LIMIT = 1 << 40  # worker_msgs.Budget's bounds


class BudgetReporter:
    """One scheduler's PAB: ``after_step`` returns a fresh report, or None when one is not due."""

    def __init__(self, budget: ChunkSizer, own: bool, every: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget, self.own, self.every, self.clock = budget, own, every, clock
        self.last = -math.inf

    def after_step(self, scheduler: Any, batch: Any) -> int | None:
        if self.own:
            self.budget.observe(batch, extend=bool(batch.forward_mode.is_extend()))
            if self.budget.steps % 256 == 0:
                self.budget.prune([*scheduler.running_batch.reqs, *batch.reqs])
        now = self.clock()
        if now - self.last < self.every:
            return None
        self.last = now
        return self.report(scheduler)

    def report(self, scheduler: Any) -> int:
        """The budget now: prefill tokens the worker can still take within its TTFT target."""
        view = self.budget.view(scheduler.running_batch.reqs, scheduler.chunked_req)
        queued = sum(len(r.origin_input_ids) for r in scheduler.waiting_queue)
        value = self.budget.policy.prefill_budget(view, queued)
        assert value is not None  # FairBatching always has one
        if not math.isfinite(value):
            return LIMIT if value > 0 else -LIMIT
        return int(max(-LIMIT, min(LIMIT, value)))


def make_reporter(config: BatchingConfig, sizer: ChunkSizer | None, every: float) -> BudgetReporter:
    """The chunk sizer's model when it runs, else an own one."""
    return BudgetReporter(sizer if sizer is not None else ChunkSizer(config), sizer is None, every)


def report_prefill_budget(scheduler: Any, batch: Any, sizer: ChunkSizer | None) -> None:
    """After ``Scheduler.process_batch_result``: refresh the worker link's budget when the router
    asked for reports (a no-op otherwise)."""
    from sglang_fair.sglang_plugin.config import config_from_env
    from sglang_fair.sglang_plugin.worker_hooks import worker_link

    link = worker_link(create=False)
    if link is None or link.link is None or not link.link.prefill_budget:
        return
    reporter = getattr(scheduler, REPORTER_ATTR, None)
    if reporter is None:
        reporter = make_reporter(config_from_env().batching, sizer, link.link.heartbeat_interval / 2)
        setattr(scheduler, REPORTER_ATTR, reporter)
    value = reporter.after_step(scheduler, batch)
    if value is not None:
        link.prefill_budget = value
