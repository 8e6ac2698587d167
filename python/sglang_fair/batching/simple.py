"""SGLang's default batch formation and Sarathi-Serve's stall-free batching."""

from __future__ import annotations

from sglang_fair.batching.base import BatchingPolicy, BatchPlan, StepView, chunk_in_order


class SGLangDefault(BatchingPolicy):
    """Prefill first (SGLang 0.5.23 without mixed chunked prefill, ``get_next_batch_to_run``): when
    there are prefill candidates the step is a prefill step, chunked to the token budget (the chunk
    size), in the host's order; otherwise every running request decodes. A step never mixes."""

    name = "sglang"
    mixes = False
    default_token_budget = 8192  # SGLang's chunked_prefill_size on large GPUs

    def plan(self, view: StepView) -> BatchPlan:
        if view.prefills:
            return BatchPlan(prefills=tuple(chunk_in_order(view.prefills, self.token_budget)[0]))
        return BatchPlan(decodes=tuple(d.rid for d in view.decodes))


class Sarathi(BatchingPolicy):
    """Stall-free batching (Sarathi-Serve, [4] Alg. 4): every running request decodes in every step,
    the rest of the token budget goes to prefill chunks in the host's order. Decodes are never left
    out, even when there are more of them than the budget (the host's running cap should keep them
    below it)."""

    name = "sarathi"
    default_token_budget = 512  # [4] §7: tuned so the 0.1 s TBT target is met

    def plan(self, view: StepView) -> BatchPlan:
        decodes = tuple(d.rid for d in view.decodes)
        chunks, _ = chunk_in_order(view.prefills, self.token_budget - len(decodes))
        return BatchPlan(decodes, tuple(chunks))
