"""FairBatching's prefill admission budget ([3] §3.4, App. A): how many more prefill tokens a worker
can take and still give a new request its first token within ``ttft``.

Worst-case relaxation: within the TTFT window, the most urgent decode forces one step per TPOT
window (each paying the fixed step cost), every running request decodes one token per its own TPOT
window (each token reading its KV), and the rest of the window is prefill at the per-token cost.
Prefill work already on the worker (admitted candidates' remaining tokens and the waiting queue)
is subtracted. Coefficients are the step-time model's (fixed, per KV token, per new token).
"""

from __future__ import annotations

import math

from sglang_fair.batching.base import StepView


def prefill_admission_budget(view: StepView, ttft: float, coefficients: tuple[float, float, float],
                             queued_tokens: int = 0) -> float:
    """Prefill tokens the worker of ``view`` can still take within ``ttft`` (may be negative:
    overcommitted). ``queued_tokens``: prefill tokens waiting for admission."""
    fixed, per_context, per_token = coefficients
    tpots = [d.slo.tpot for d in view.decodes]
    steps = math.ceil(ttft / min(tpots)) if tpots else 1
    decode_time = sum(math.floor(ttft / d.slo.tpot) * (per_context * d.context + per_token)
                      for d in view.decodes)
    left = ttft - steps * fixed - decode_time
    capacity = left / per_token if per_token > 0 else math.inf
    pending = sum(p.remaining for p in view.prefills) + queued_tokens
    return capacity - pending
