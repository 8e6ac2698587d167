"""SLAI, the SLO-aware scheduler of [4] (§6): decodes wait until they turn critical.

A running request's next decode is *critical* once now >= its last schedulable time

    C = e + TBT - delta * t_batch

(e: end of the step that produced its last token; TBT: its target; t_batch: the mean step time
observed so far; delta: the offset, raised from ``offset`` to ``offset_high`` when KV use reaches
``memory_threshold``, [4]'s dynamic offset). A step takes, within the token budget tau, at most
beta decodes (decode limit) and at most alpha active requests (cap): (1) critical decodes by C;
(2) prefills, non-preemptive: those already started first, then new ones by shortest prefill first
(``spf``) or arrival (``fcfs``), chunked to the budget; (3) the other decodes by C.
"""

from __future__ import annotations

from collections.abc import Hashable

from sglang_fair.batching.base import (
    BatchingConfig,
    BatchingPolicy,
    BatchPlan,
    DecodeView,
    PrefillView,
    StepView,
    prefill_cost,
)


class SLAI(BatchingPolicy):
    name = "slai"
    default_token_budget = 512  # [4] §7

    def __init__(self, config: BatchingConfig) -> None:
        super().__init__(config)
        self.steps = 0
        self.busy = 0.0

    @property
    def mean_batch_time(self) -> float:
        return self.busy / self.steps if self.steps else 0.0

    def offset(self, view: StepView) -> float:
        c = self.config
        return c.offset_high if view.memory_use >= c.memory_threshold else c.offset

    def last_schedulable(self, d: DecodeView, delta: float) -> float:
        return d.last_token_at + d.slo.tpot - delta * self.mean_batch_time

    def _prefill_order(self, prefills: list[PrefillView]) -> list[PrefillView]:
        started = [p for p in prefills if p.started]
        new = [p for p in prefills if not p.started]
        if self.config.prefill_order == "spf":
            new.sort(key=lambda p: (p.remaining, p.arrival))
        else:
            new.sort(key=lambda p: p.arrival)
        return started + new

    def plan(self, view: StepView) -> BatchPlan:
        delta = self.offset(view)
        by_c = sorted(view.decodes, key=lambda d: self.last_schedulable(d, delta))
        critical = [d for d in by_c if view.now >= self.last_schedulable(d, delta)]
        tokens, beta = self.token_budget, self.config.decode_limit
        decodes: list[Hashable] = [d.rid for d in critical[: min(beta, tokens)]]
        tokens -= len(decodes)
        active = len(view.decodes) + sum(p.started for p in view.prefills)
        prefills: list[tuple[Hashable, int]] = []
        for p in self._prefill_order(list(view.prefills)):
            if tokens <= 0:
                break
            if not p.started:
                if active >= self.config.max_active:
                    continue
                active += 1
            chunk = min(p.remaining, tokens)
            prefills.append((p.rid, chunk))
            tokens -= prefill_cost(chunk)
        room = max(0, min(beta - len(decodes), tokens))
        decodes += [d.rid for d in by_c[len(critical):][:room]]
        if not decodes and not prefills and by_c:  # nothing fit but work is waiting (alpha): decode
            decodes = [by_c[0].rid]
        return BatchPlan(tuple(decodes), tuple(prefills))

    def on_step(self, new_tokens: int, context_tokens: int, seconds: float) -> None:
        self.steps += 1
        self.busy += seconds
