"""Preble's local scheduler: the multi-level priority wait queue ("fcfs-mpq"; Srivatsa et al., ICLR
2025, the local half of the Preble baseline of [1] §6.1, to which [1] credits Preble's fairness).

A waiting request is placed, when the scheduler first sees it, in one of ``GROUPS`` (10) priority
groups by its cache hit ratio h = cached / input at that moment: group 0 if h = 0, else
ceil(10 h) - 1 (group 9: more than 90% cached). It stays in that group until admitted (a retracted
request is placed again). Each admission step serves one group, taking the groups in turn from the
highest down, cyclically, skipping empty ones; within the group requests go in arrival order, and
at most (g + 1) * ``PER_LEVEL`` (10) of them are admitted. Over a cycle a group therefore gets a
share of admissions proportional to its priority, and no group starves: locality is favoured
without LPM's starvation of uncached requests.

As in Preble's SGLang fork, requests that do not fit are skipped and the next one is tried
(this project's hosts are work-conserving), and the group of a request is not updated when its
cached prefix changes while it waits. Preble's scheduler also chunks prefills with its own budget;
here the host's budget applies.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from sglang_fair.admission.base import AdmissionConfig, AdmissionPolicy, Budget, R, WaitingRequest

GROUPS = 10
PER_LEVEL = 10


def priority_group(req: WaitingRequest) -> int:
    """The group of a request by its hit ratio: 0 (nothing cached) .. GROUPS - 1 (> 90% cached)."""
    if req.input_len <= 0 or req.cached_len <= 0:
        return 0
    return min(GROUPS - 1, math.ceil(req.cached_len / req.input_len * GROUPS) - 1)


class PrebleQueue(AdmissionPolicy):
    name = "preble"
    orders_by_cache = True  # a new request's group reads its cached prefix

    def __init__(self, config: AdmissionConfig) -> None:
        super().__init__(config)
        self.groups: dict[Hashable, int] = {}
        self.next_group = GROUPS - 1

    def select(self, waiting: Sequence[R], budget: Budget) -> list[R]:
        members: dict[int, list[R]] = {}
        for req in waiting:
            g = self.groups.setdefault(req.rid, priority_group(req))
            members.setdefault(g, []).append(req)
        if not members:
            return []
        g = next((self.next_group - k) % GROUPS for k in range(GROUPS)
                 if (self.next_group - k) % GROUPS in members)
        self.next_group = (g - 1) % GROUPS
        quota = (g + 1) * PER_LEVEL
        admitted: list[R] = []
        for req in sorted(members[g], key=lambda r: r.arrival):
            if len(admitted) >= quota or budget.exhausted():
                break
            if budget.try_add(req):
                self._charge(req.client, self._admit(req))
                self.groups.pop(req.rid, None)
                admitted.append(req)
        return admitted

    def _requeue(self, req: WaitingRequest) -> None:
        self.groups.pop(req.rid, None)

    def on_drop(self, req: WaitingRequest) -> None:
        super().on_drop(req)
        self.groups.pop(req.rid, None)
