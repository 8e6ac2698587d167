"""A linear step-time model recalibrated online (FairBatching, [3] §3.2):

    t = fixed + per_context * context_tokens + per_token * new_tokens

It starts from a prior (an offline fit) and is refitted by least squares on the last ``window``
observed steps, shrunk toward the prior (ridge), so few or alike observations cannot send it astray.
"""

from __future__ import annotations

from collections import deque

from sglang_fair.core.errors import require
from sglang_fair.core.linalg import solve_linear

_SCALE = (1.0, 1e5, 1e2)  # features in units of one step, 100k KV tokens, 100 new tokens
_RIDGE = 0.05  # weight of the prior, in observations


class OnlineStepModel:
    """See the module docstring. ``prior`` is (fixed, per_context, per_token) in seconds."""

    def __init__(self, prior: tuple[float, float, float], window: int = 256) -> None:
        require(all(c >= 0 for c in prior), f"step-time prior must be >= 0, got {prior}")
        require(prior[0] > 0 or prior[2] > 0, "step-time prior: fixed or per-token time must be > 0")
        self.prior = prior
        self.window: deque[tuple[tuple[float, float, float], float]] = deque(maxlen=window)
        self._coef = prior
        theta0 = [c * s for c, s in zip(prior, _SCALE, strict=True)]
        self._xtx = [[_RIDGE if i == j else 0.0 for j in range(3)] for i in range(3)]
        self._xty = [_RIDGE * t for t in theta0]

    @staticmethod
    def _features(context: int, new_tokens: int) -> tuple[float, float, float]:
        return (1.0, context / _SCALE[1], new_tokens / _SCALE[2])

    def observe(self, context: int, new_tokens: int, seconds: float) -> None:
        """Record one step that took ``seconds`` and refit (sums kept over the window)."""
        if len(self.window) == self.window.maxlen:
            self._add(*self.window[0], sign=-1.0)
        x = self._features(context, new_tokens)
        self.window.append((x, seconds))
        self._add(x, seconds, sign=1.0)
        theta = solve_linear(self._xtx, self._xty)
        a, b, c = (max(0.0, t / s) for t, s in zip(theta, _SCALE, strict=True))
        self._coef = (a, b, c) if a > 0 or c > 0 else self.prior

    def _add(self, x: tuple[float, float, float], y: float, sign: float) -> None:
        for i in range(3):
            self._xty[i] += sign * x[i] * y
            for j in range(3):
                self._xtx[i][j] += sign * x[i] * x[j]

    @property
    def coefficients(self) -> tuple[float, float, float]:
        """(fixed, per_context, per_token), each >= 0."""
        return self._coef

    def predict(self, context: int, new_tokens: int) -> float:
        a, b, c = self._coef
        return a + b * context + c * new_tokens
