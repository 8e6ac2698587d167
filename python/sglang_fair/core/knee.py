"""The batch a worker runs usefully: where more running requests stop adding much service.

A decode step of n requests holding C KV tokens takes about t = a + b n + c C (the weights read once;
each request's sampling and its KV on top), so at the running requests' mean context x = C / n a
worker's decode throughput n / t approaches 1 / (b + c x) and reaches ``share`` of it at

    n* = share / (1 - share) x a / (b + c x).

On a GPU a is large against b + c x (the A100 preset at 2,000 tokens of context: a ratio of about 40,
n* ~ 120 at share 0.75); on a CPU a step of 50 takes about seven of 5 (a ratio of about 3, n* ~ 10). A
router that counts a worker's capacity in slots (256) where its throughput stopped growing at 10 leaves a
hot prefix on the few workers that hold it while others idle; counted up to n*, it spreads it.

:class:`BatchKnee` fits (a, b, c) by least squares over the last ``window`` decode steps the host
measured and says n* at their mean context. While the steps seen do not tell, it says the last n* they
told (0 before). They do not tell when they are too few, when their batch sizes lie within a factor of
two (a worker held at its cap, whose cap is then its capacity; a fit over so narrow a span is noise), or
when the fit's time at no requests or its cost per request is not positive.
"""

from __future__ import annotations

import math
from collections import deque

from sglang_fair.core.errors import require
from sglang_fair.core.linalg import least_squares

KNEE_SHARE = 0.75  # n*: the batch whose throughput is this share of the worker's largest
KNEE_WINDOW = 512  # decode steps remembered
KNEE_MIN_STEPS = 32  # steps seen before n* is said
KNEE_MIN_SPREAD = 2.0  # the largest batch seen must be at least this x the smallest
_CONTEXT_UNIT = 1000.0  # KV tokens per unit of the fit's third feature (a well-scaled system)


class BatchKnee:
    """See the module docstring. State only; the host calls :meth:`observe` once per decode step. A fit
    reads the whole window (about a millisecond at 512 steps), so :meth:`knee` fits again only once
    ``refit_every`` steps came since the last fit (a host that asks at every step: 16 or more)."""

    def __init__(self, share: float = KNEE_SHARE, window: int = KNEE_WINDOW, refit_every: int = 1) -> None:
        require(0 < share < 1, f"knee share must be in (0, 1), got {share}")
        require(window >= KNEE_MIN_STEPS, f"knee window must be >= {KNEE_MIN_STEPS}, got {window}")
        require(refit_every >= 1, f"knee refit_every must be >= 1, got {refit_every}")
        self.share, self.refit_every = share, refit_every
        self.steps: deque[tuple[int, float, float]] = deque(maxlen=window)  # (n, C / unit, seconds)
        self.told = 0  # the last n* the steps told: kept while later windows do not tell
        self._unfitted = 0  # steps observed since the last fit

    def observe(self, requests: int, context_tokens: int, seconds: float) -> None:
        """One decode step of ``requests`` running requests holding ``context_tokens`` took ``seconds``."""
        if requests >= 1 and context_tokens >= 0 and seconds > 0 and math.isfinite(seconds):
            self.steps.append((requests, context_tokens / _CONTEXT_UNIT, seconds))
            self._unfitted += 1

    def fit(self) -> tuple[float, float, float] | None:
        """(a, b, c) of t = a + b n + c C (C in KV tokens) over the steps remembered; None while they
        do not tell."""
        if len(self.steps) < KNEE_MIN_STEPS:
            return None
        sizes = [n for n, _, _ in self.steps]
        if max(sizes) < KNEE_MIN_SPREAD * min(sizes):
            return None
        rows = [(1.0, float(n), ctx) for n, ctx, _ in self.steps]
        a, b, c = least_squares(rows, [t for _, _, t in self.steps])
        return a, b, c / _CONTEXT_UNIT

    def knee(self) -> int:
        """n* in requests (at least 1) at the remembered steps' mean context; while they do not tell,
        the last n* they told (0: never)."""
        if self._unfitted < self.refit_every:
            return self.told
        self._unfitted = 0
        fit = self.fit()
        if fit is None:
            return self.told
        fixed, per_request, per_context = fit
        context = sum(ctx for _, ctx, _ in self.steps) * _CONTEXT_UNIT / sum(n for n, _, _ in self.steps)
        slope = per_request + per_context * context
        if fixed > 0 and slope > 0:
            self.told = max(1, math.ceil(self.share / (1 - self.share) * fixed / slope - 1e-9))
        return self.told
