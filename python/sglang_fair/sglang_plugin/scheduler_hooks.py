"""Hooks inside the scheduler process: policy choice, queue events, admission, per-step results.

Every function here is registered by :mod:`sglang_fair.sglang_plugin.hooks`; each leaves SGLang's
behaviour untouched unless the scheduler's ``--schedule-policy`` is one of :data:`FAIR_POLICIES`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sglang_fair.admission import make_admission_policy
from sglang_fair.sglang_plugin.adder import fair_adder_class
from sglang_fair.sglang_plugin.chunk_sizer import ChunkSizer, sized_adder_class
from sglang_fair.sglang_plugin.config import FAIR_POLICIES, config_from_env
from sglang_fair.sglang_plugin.match_index import INDEX_ATTR
from sglang_fair.sglang_plugin.pab_report import report_prefill_budget
from sglang_fair.sglang_plugin.publish import Publisher, state_dir
from sglang_fair.sglang_plugin.state import FairState
from sglang_fair.sglang_plugin.tenant_reload import allow_request_priority, scheduler_reloader
from sglang_fair.sglang_plugin.worker_hooks import observe_step, report_load

logger = logging.getLogger("sglang_fair")
STATE_ATTR = "_sglang_fair_state"
BUDGET_ATTR = "_sglang_fair_chunk_sizer"
RELOAD_ATTR = "_sglang_fair_tenant_reloader"


def state_of(schedule_policy: Any) -> FairState | None:
    return getattr(schedule_policy, STATE_ATTR, None)


def validate_policy(original: Any, self: Any, policy: str, tree_cache: Any) -> Any:
    """AROUND ``SchedulePolicy._validate_and_adjust_policy``: a fair name builds the core policy.

    SGLang itself is told ``lpm`` (so its cache-aware paths stay on); the queue order and the
    admission come from the core policy through the hooks below.
    """
    if policy not in FAIR_POLICIES:
        return original(self, policy, tree_cache)
    config = config_from_env()
    admission = make_admission_policy(config.for_policy(policy))
    state = FairState(admission, client_ttl=config.edge.idle_ttl())
    allow_request_priority(state, config.edge.key_table.request_priority)
    setattr(self, STATE_ATTR, state)
    setattr(self, RELOAD_ATTR, scheduler_reloader(config, policy, admission, state))
    cost = admission.cost
    logger.info("sglang-fair: %s admission (Q^u=%s, w_e=%s, w_q=%s, weights=%s)", policy,
                admission.quantum, cost.w_e, cost.w_q, dict(cost.client_weights))
    return original(self, "lpm", tree_cache)


def calc_priority(original: Any, self: Any, waiting_queue: list[Any], *args: Any, **kwargs: Any) -> Any:
    """AROUND ``SchedulePolicy.calc_priority``: the cached prefix of every waiting request.

    SGLang matches at most 128 waiting requests (then falls back to FCFS); DLPM needs the cached
    prefix of every request, and keeps them in LPM order in the state (any queue length). Only the
    requests whose match can have changed since the last step are matched again
    (:mod:`match_index`). VTC's order does not depend on the cache, so its queue is not matched here
    (admitted requests are matched by ``init_next_round_input`` in the budget, as in SGLang).
    """
    state = state_of(self)
    if state is None:
        return original(self, waiting_queue, *args, **kwargs)
    reloader = getattr(self, RELOAD_ATTR, None)
    if reloader is not None:
        reloader.poll(time.monotonic())  # the tenant file's weights and bands (tenant_reload.py)
    state.sync(waiting_queue)
    if cache_ordered(state, self.tree_cache):
        state.match(self.tree_cache)
    return None


def cache_ordered(state: FairState, tree_cache: Any) -> bool:
    """Does ``state``'s policy order by the cached prefix, with a cache to match against?"""
    return state.policy.orders_by_cache and not getattr(tree_cache, "disable", False)


def tree_insert(result: Any, self: Any, params: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``UnifiedRadixCache.insert``: requests whose match can grow are matched again."""
    index = getattr(self, INDEX_ATTR, None)
    if index is not None and result is not None:
        index.on_insert(params.key, result.prefix_len)


def tree_node_gone(_result: Any, self: Any, node_id: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``UnifiedRadixCache._evict_device_leaf`` / ``_demote``: matches that ended there."""
    index = getattr(self, INDEX_ATTR, None)
    if index is not None:
        index.on_node_gone(node_id)


def tree_changed(_result: Any, self: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER a tree change the index does not follow in detail (reset, subtree drop, load back)."""
    index = getattr(self, INDEX_ATTR, None)
    if index is not None:
        index.on_unknown_change()


def chunk_sizer_of(scheduler: Any) -> ChunkSizer | None:
    """The scheduler's :class:`ChunkSizer`, made on first use; None unless ``--batch-policy
    fairbatching`` (any ``--schedule-policy``)."""
    budget = getattr(scheduler, BUDGET_ATTR, None)
    if budget is None:
        config = config_from_env().batching
        budget = ChunkSizer(config) if config.policy == "fairbatching" else False
        if budget and not interleaves(scheduler):
            logger.warning("sglang-fair: --batch-policy fairbatching sizes chunks only with "
                           "--enable-mixed-chunk or --prefill-decode-interval N: without them SGLang runs a "
                           "prompt's chunks back to back and the decodes wait for all of them anyway")
            budget = False
        elif budget:
            logger.info("sglang-fair: fairbatching time-budget chunk sizing (TTFT %s s, TPOT %s s)",
                        config.ttft, config.tpot)
        setattr(scheduler, BUDGET_ATTR, budget)
    return budget if isinstance(budget, ChunkSizer) else None


def interleaves(scheduler: Any) -> bool:
    """Do decodes run between a prompt's chunks (mixed chunk, or SGLang's prefill-decode interval)?"""
    return bool(scheduler.is_mixed_chunk) or (scheduler.prefill_decode_interval or 0) > 0


def prefill_adder_class(original: Any, self: Any) -> Any:
    """AROUND ``Scheduler.get_prefill_adder_class``: the time-budget chunk sizing with
    ``--batch-policy fairbatching``, the fair adder when a fair policy runs."""
    base = original(self)
    budget = chunk_sizer_of(self)
    if budget is not None:
        base = sized_adder_class(base, self, budget)
    state = state_of(self.policy)
    return base if state is None else fair_adder_class(base, self, state)


def add_request_to_queue(_result: Any, self: Any, req: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``Scheduler._add_request_to_queue``: arrival, or return of a retracted request."""
    state = state_of(self.policy)
    if state is not None and self.waiting_queue and self.waiting_queue[-1] is req:
        state.low_first = bool(getattr(self, "schedule_low_priority_values_first", False))
        state.arrive(req)


def abort_output(_result: Any, self: Any, abort_req: Any, req: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``Scheduler.send_abort_output``: an aborted request leaves the fairness state (requests
    ``retract_decode`` aborts never reach a batch result with ``finished_reason`` set)."""
    state = state_of(self.policy)
    if state is not None and req is not None:
        state.abandon(req)


def process_batch_result(_result: Any, self: Any, batch: Any, *args: Any, **kwargs: Any) -> None:
    """AFTER ``Scheduler.process_batch_result``: the step budget learns the batch's time; charge
    output tokens, retire finished requests."""
    budget = chunk_sizer_of(self)
    if budget is not None:
        budget.observe(batch, extend=bool(batch.forward_mode.is_extend()))
        if budget.steps % 256 == 0:
            budget.prune([*self.running_batch.reqs, *batch.reqs])
            logger.info("sglang-fair: step model after %d steps: %.4g s + %.3g s/KV token + %.3g s/token",
                        budget.steps, *budget.policy.model.coefficients)
    report_prefill_budget(self, batch, budget)
    observe_step(self, batch, time.monotonic())
    state = state_of(self.policy)
    report_load(self, state.policy.service_rate if state is not None else 0.0, batch)
    if state is None:
        return
    state.after_step()
    if len(state.waiting) != len(self.waiting_queue):
        state.reconcile(self.waiting_queue)
    state.expire()
    _publish(self, state)


def _publish(scheduler: Any, state: FairState) -> None:
    publisher = getattr(scheduler, "_sglang_fair_publisher", None)
    if publisher is None:
        publisher = _make_publisher(scheduler, state)
        scheduler._sglang_fair_publisher = publisher
    if not isinstance(publisher, Publisher):
        return
    idle = not state.running and not state.waiting
    publisher.maybe_write(state.version, idle, state.snapshot)


def _make_publisher(scheduler: Any, state: FairState) -> Publisher | bool:
    from sglang.srt.runtime_context import get_observability, get_parallel

    parallel = get_parallel()
    directory = state_dir()
    if directory is None or (parallel.tp_rank or 0) != 0:
        return False
    dp_rank = parallel.dp_rank or 0
    publisher = Publisher(directory / f"scheduler-{dp_rank}.json", state.policy.name)
    policy = state.policy  # Q^u as the bound takes it: the largest a refill gave, else the current one
    publisher.quantum = lambda: max(float(getattr(policy, "largest_quantum", 0.0)), policy.quantum)
    if get_observability().enable_metrics:
        from sglang_fair.sglang_plugin.client_gauges import ClientGauges

        publisher.gauges = ClientGauges(dp_rank)
    return publisher
