"""FairBatching ([3] §3): slack-driven batch formation under a time budget.

- Slack: each request's next token is due at ``t0 + k * TPOT`` (k: tokens so far, t0: its first
  token), so its TPOT as measured holds; ``envelope=arrival`` uses [3]'s literal
  ``arrival + TTFT + k * TPOT``, which lets a request whose first token came early spend the TTFT
  it did not use on slower decoding. Slack is the deadline minus now (for a prefill, its first
  token's deadline, ``arrival + TTFT``).
- Time budget T (§3.2): the smallest slack of the running decodes, but at least their smallest TPOT
  target (no decodes: no time limit), times ``time_safety`` (a margin for the step-time model's
  error; 1 = [3]'s budget); the token budget stays as a hard cap (CUDA graph sizes).
- Step time: ``fixed + per_context * context + per_token * new_tokens``
  (:class:`~sglang_fair.batching.stepmodel.OnlineStepModel`), refitted from observed steps.
- Formation (§3.3, Alg. 1): (1) urgent decodes, slack < T + min TPOT, always (token cap only);
  (2) prefills; (3) the other decodes; each group by slack, ascending, while the batch's estimated
  time stays within T. A prefill that does not fit whole gets the largest chunk that does.
"""

from __future__ import annotations

import math
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
from sglang_fair.batching.pab import prefill_admission_budget
from sglang_fair.batching.stepmodel import OnlineStepModel

# (fixed, per KV token, per new token), seconds: the simulator's a100-llama8b roofline preset
# (public figures, sim/steptime.py), used when no prior is configured
DEFAULT_PRIOR = (1.23e-2, 9.2e-8, 1.03e-4)
MIN_CHUNK = 16  # chunk_budget's floor, tokens


class _Batch:
    """A batch being formed: its tokens, KV read and new tokens, against the model."""

    def __init__(self, model: OnlineStepModel, token_cap: int) -> None:
        self.model = model
        self.tokens_left = token_cap
        self.context = 0
        self.new = 0
        self.decodes: list[Hashable] = []
        self.prefills: list[tuple[Hashable, int]] = []

    def time(self) -> float:
        return self.model.predict(self.context, self.new) if self.decodes or self.prefills else 0.0

    def add_decode(self, d: DecodeView, limit: float) -> bool:
        if self.tokens_left < 1 or self.model.predict(self.context + d.context + 1, self.new + 1) > limit:
            return False
        self.decodes.append(d.rid)
        self.context += d.context + 1
        self.new += 1
        self.tokens_left -= 1
        return True

    def add_prefill(self, p: PrefillView, limit: float) -> None:
        fixed, per_context, per_token = self.model.coefficients
        chunk = min(p.remaining, self.tokens_left)
        if math.isfinite(limit):
            spare = limit - fixed - per_context * (self.context + p.prefilled) - per_token * self.new
            per = per_context + per_token
            chunk = min(chunk, int(spare / per + 1e-9) if per > 0 else chunk) if spare >= 0 else -1
        if chunk < 0 or self.tokens_left < prefill_cost(chunk) or (chunk == 0 and p.remaining > 0):
            return
        self.prefills.append((p.rid, chunk))
        self.context += p.prefilled + chunk
        self.new += chunk
        self.tokens_left -= prefill_cost(chunk)


class FairBatching(BatchingPolicy):
    name = "fairbatching"
    default_token_budget = 8192  # a large cap: the time budget decides ([3] §3.2)

    def __init__(self, config: BatchingConfig) -> None:
        super().__init__(config)
        prior = (config.step_fixed, config.step_per_context, config.step_per_token)
        self.model = OnlineStepModel(prior if any(prior) else DEFAULT_PRIOR, config.calibration_window)
        self.arrival_envelope = config.envelope == "arrival"

    def due(self, d: DecodeView) -> float:
        """When ``d``'s next token is due (``config.envelope``)."""
        return d.envelope_deadline if self.arrival_envelope else d.deadline

    def time_budget(self, view: StepView) -> float:
        """T: the smallest decode slack, at least the smallest TPOT target; inf without decodes."""
        if not view.decodes:
            return math.inf
        slack = min(self.due(d) for d in view.decodes) - view.now
        return max(slack, min(d.slo.tpot for d in view.decodes)) * self.config.time_safety

    def plan(self, view: StepView) -> BatchPlan:
        now, limit = view.now, self.time_budget(view)
        urgent_below = limit + min((d.slo.tpot for d in view.decodes), default=0.0)
        by_slack = sorted(view.decodes, key=self.due)
        urgent = [d for d in by_slack if self.due(d) - now < urgent_below]
        rest = by_slack[len(urgent):]
        batch = _Batch(self.model, self.token_budget)
        for d in urgent:
            batch.add_decode(d, math.inf)
        for p in sorted(view.prefills, key=lambda p: p.deadline):
            batch.add_prefill(p, limit)
        for d in rest:
            batch.add_decode(d, limit)
        if not batch.decodes and not batch.prefills and by_slack:  # never idle with work to do
            batch.add_decode(by_slack[0], math.inf)
        return BatchPlan(tuple(batch.decodes), tuple(batch.prefills))

    def on_step(self, new_tokens: int, context_tokens: int, seconds: float) -> None:
        self.model.observe(context_tokens, new_tokens, seconds)

    def prefill_budget(self, view: StepView, queued_tokens: int) -> float | None:
        """[3]'s prefill admission budget for a request with the default TTFT target (pab.py)."""
        return prefill_admission_budget(view, self.config.ttft, self.model.coefficients, queued_tokens)

    def chunk_budget(self, view: StepView, decodes_ride: bool) -> int | None:
        """Prefill tokens for a host that cannot defer decodes (SGLang: every running request decodes
        whenever a decode step runs): the largest chunk that keeps the step's estimated time within
        the time budget T, or None (no running decodes: no time limit). ``decodes_ride``: every
        running decode is in the same step (SGLang's mixed chunk); otherwise the step is prefill only
        and the decodes wait for it. The first prefill candidate's cached prefix is read; the result
        is at least :data:`MIN_CHUNK` (progress when the model says even an empty step overruns T)
        and at most the token cap."""
        limit = self.time_budget(view)
        if not math.isfinite(limit):
            return None
        fixed, per_context, per_token = self.model.coefficients
        riding = view.decodes if decodes_ride else ()
        context = sum(d.context + 1 for d in riding) + (view.prefills[0].prefilled if view.prefills else 0)
        spare = limit - fixed - per_context * context - per_token * len(riding)
        per = per_context + per_token
        if per <= 0:
            return self.token_budget
        chunk = int(spare / per + 1e-9) if spare > 0 else 0
        return min(self.token_budget, max(MIN_CHUNK, chunk))
