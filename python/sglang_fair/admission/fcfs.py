"""First come, first served: arrival order, skipping what does not fit (work-conserving)."""

from __future__ import annotations

from collections.abc import Sequence

from sglang_fair.admission.base import AdmissionPolicy, Budget, R


def admit_in_order(policy: AdmissionPolicy, ordered: Sequence[R], budget: Budget) -> list[R]:
    """Admit every request of ``ordered`` that fits, in that order, until the budget is exhausted."""
    admitted: list[R] = []
    for req in ordered:
        if budget.exhausted():
            break
        if budget.try_add(req):
            policy._charge(req.client, policy._admit(req))
            admitted.append(req)
    return admitted


class FCFS(AdmissionPolicy):
    name = "fcfs"

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        return admit_in_order(self, sorted(waiting, key=lambda r: r.arrival), budget)
