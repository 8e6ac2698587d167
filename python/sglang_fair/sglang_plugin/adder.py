"""SGLang's ``PrefillAdder`` as the core's ``Budget``: the policy, not the queue order, decides admission.

``Scheduler._get_new_batch_prefill_raw`` walks the waiting queue and calls ``adder.add_one_req`` per
request until one does not return CONTINUE. The fair adder answers the first such call by running
the policy's ``select(waiting, budget)`` over the whole queue, where ``budget.try_add`` performs the
scheduler loop's own per-request steps (the running-request limit, ``init_next_round_input`` — the
radix-cache match — and the real ``add_one_req``), then returns OTHER so the loop stops: the adder's
``can_run_list`` then holds exactly what the policy admitted, in its order. Not supported with a fair
policy (refused at start-up): LoRA, hierarchical-cache storage prefetch, PP, disaggregation, diffusion
LMs, hybrid Mamba models. ``--enable-priority-scheduling`` is taken off SGLang's arguments
(``defaults.py``): the policy, not SGLang's priority sort or preemption, orders admission.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sglang_fair.sglang_plugin.state import FairState


class AdderBudget:
    """``Budget`` over one PrefillAdder for one scheduler step."""

    def __init__(self, adder: Any, add_one: Any, scheduler: Any, kwargs: dict[str, Any]) -> None:
        from sglang.srt.managers.schedule_policy import AddReqResult

        self.adder, self.add_one, self.scheduler, self.kwargs = adder, add_one, scheduler, kwargs
        self.result_type = AddReqResult
        self.stopped = False

    def exhausted(self) -> bool:
        return self.stopped or bool(self.adder.budget_state() == self.result_type.OTHER)

    def room(self) -> int:
        """Requests the running-request limit lets this step still start (the scheduler loop's check)."""
        batch = self.adder.running_batch
        held = sum(r.kv.holds_kv for r in self.adder.can_run_list)
        limit = self.scheduler.get_num_allocatable_reqs(
            len(batch.reqs), None, running_batch=batch, num_held_rows=held
        )
        return max(int(limit) - len(self.adder.can_run_list), 0)

    def try_add(self, ad: Any) -> bool:
        if self.stopped:
            return False
        batch = self.adder.running_batch
        if self.room() <= 0:
            batch.batch_is_full = True
            self.stopped = True
            return False
        req = ad.req
        req.init_next_round_input(self.scheduler.tree_cache)
        result = self.add_one(self.adder, req, **self.kwargs)
        run_list = self.adder.can_run_list
        added = bool(run_list) and run_list[-1] is req
        if result != self.result_type.CONTINUE:
            self.stopped = True
            if result == self.result_type.NO_TOKEN:
                batch.batch_is_full = bool(run_list) or not batch.is_empty()
        return added


_CLASSES: dict[tuple[str, int, type], type] = {}


def subclass_once(name: str, base: type, scheduler: Any, members: Callable[[], dict[str, Any]]) -> type:
    """``base`` subclassed as ``name`` with ``members()``, built once per (name, scheduler, base):
    SGLang asks for its adder class every step."""
    key = (name, id(scheduler), base)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = _CLASSES[key] = type(name, (base,), members())
    return cls


def fair_adder_class(base: type, scheduler: Any, state: FairState) -> type:
    """A subclass of ``base`` (SGLang's adder class) whose admission runs ``state``'s policy."""
    return subclass_once("FairPrefillAdder", base, scheduler, lambda: _fair_members(base, scheduler, state))


def _fair_members(base: type, scheduler: Any, state: FairState) -> dict[str, Any]:
    from sglang.srt.managers.schedule_policy import AddReqResult

    base_add_one = getattr(base, "add_one_req")  # noqa: B009 (base is SGLang's PrefillAdder class)

    def add_one_req(self: Any, req: Any, has_chunked_req: bool, truncation_align_size: Any) -> Any:
        if getattr(self, "_fair_selected", False):
            return AddReqResult.OTHER
        self._fair_selected = True
        kwargs = {"has_chunked_req": has_chunked_req, "truncation_align_size": truncation_align_size}
        budget = AdderBudget(self, base_add_one, scheduler, kwargs)
        state.select(scheduler.waiting_queue, budget)
        return AddReqResult.OTHER

    return {"add_one_req": add_one_req, "__doc__": __doc__}
