"""Per-tenant budgets: requests per minute and tokens (input + output) per minute, over a sliding minute.

A :class:`Budget` is what a tenant bought (``0``: no bound on that count); a :class:`BudgetBook` keeps
what each tenant used in the last :data:`WINDOW_S` seconds and refuses a tenant's next request while
either count has reached its bound, with the seconds until the minute frees enough (``Retry-After``).

Requests are charged when admitted; tokens when they are known (input at dispatch or when the scheduler
counts them, output at the finish), so a tenant may overshoot its token budget by what its requests in
flight then produce: the bound is on admission, as in SMG's and Envoy's token-bucket rate limits. Time is
passed in (``now``, seconds on any monotonic clock). State only; the edges that enforce it: ``serve``'s
:class:`sglang_fair.edge.budget_gate.BudgetMiddleware` and the gateway's router (shared with its peers,
which announce every dispatch and finish).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.core.errors import require

WINDOW_S = 60.0


@dataclass(frozen=True)
class Budget:
    """What one tenant may use per minute (0: unbounded)."""

    requests_per_minute: int = 0
    tokens_per_minute: int = 0

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            require(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def bounded(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)


class OverBudget(RuntimeError):
    """A tenant's request refused: its budget for the minute is used (``retry_after``: whole seconds)."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass
class Usage:
    """One tenant's charges in the window: (time, requests, tokens), oldest first, and their sums."""

    events: deque[tuple[float, int, int]] = field(default_factory=deque)
    requests: int = 0
    tokens: int = 0

    def add(self, now: float, requests: int, tokens: int) -> None:
        self.events.append((now, requests, tokens))
        self.requests += requests
        self.tokens += tokens

    def trim(self, now: float) -> None:
        while self.events and self.events[0][0] <= now - WINDOW_S:
            _, requests, tokens = self.events.popleft()
            self.requests -= requests
            self.tokens -= tokens

    def freed_at(self, over: float, which: int) -> float:
        """When enough of the window has left for its sum of ``which`` (1 requests, 2 tokens) to drop
        by ``over`` (> 0)."""
        left = 0.0
        for event in self.events:
            left += event[which]
            if left >= over:
                return event[0] + WINDOW_S
        return self.events[-1][0] + WINDOW_S if self.events else 0.0


class BudgetBook:
    """Tenant -> :class:`Budget` (those not named are unbounded) and what each used in the last minute."""

    def __init__(self, budgets: Mapping[str, Budget]) -> None:
        self.budgets = {tenant: b for tenant, b in budgets.items() if b.bounded}
        self.usage: dict[str, Usage] = {}

    def set_budgets(self, budgets: Mapping[str, Budget]) -> None:
        """Replace the budgets (a reloaded tenant file); what each tenant used in the last minute stays
        counted against its new budget."""
        self.budgets = {tenant: b for tenant, b in budgets.items() if b.bounded}

    @property
    def enabled(self) -> bool:
        return bool(self.budgets)

    def _usage(self, tenant: str, now: float) -> Usage:
        usage = self.usage.setdefault(tenant, Usage())
        usage.trim(now)
        return usage

    def check(self, tenant: str, now: float) -> None:
        """Raise :class:`OverBudget` if ``tenant`` has used a bound of its budget in the last minute."""
        budget = self.budgets.get(tenant)
        if budget is None:
            return
        usage = self._usage(tenant, now)
        for which, used, bound, unit in ((1, usage.requests, budget.requests_per_minute, "requests"),
                                         (2, usage.tokens, budget.tokens_per_minute, "tokens")):
            if bound and used >= bound:
                wait = max(1, math.ceil(usage.freed_at(used - bound + 1, which) - now))
                raise OverBudget(f"tenant {tenant!r} has used its {bound} {unit} per minute "
                                 f"({used} in the last minute); retry in {wait} s", wait)

    def admit(self, tenant: str, now: float, tokens: int = 0) -> None:
        """:meth:`check`, then charge one request (and ``tokens`` known at admission)."""
        self.check(tenant, now)
        self.charge(tenant, now, requests=1, tokens=tokens)

    def charge(self, tenant: str, now: float, requests: int = 0, tokens: int = 0) -> None:
        """Count what ``tenant`` used (at this edge or a peer's); nothing for an unbounded tenant."""
        if tenant in self.budgets and (requests or tokens):
            self._usage(tenant, now).add(now, requests, tokens)

    def view(self, now: float, allowed: set[str] | None = None) -> dict[str, Any]:
        """Each bounded tenant's budget, what it used in the last minute and what is left."""
        out: dict[str, Any] = {}
        for tenant, budget in sorted(self.budgets.items()):
            if allowed is not None and tenant not in allowed:
                continue
            usage = self._usage(tenant, now)
            out[tenant] = {"requests_per_minute": budget.requests_per_minute,
                           "tokens_per_minute": budget.tokens_per_minute,
                           "requests_used": usage.requests, "tokens_used": usage.tokens,
                           "requests_left": max(0, budget.requests_per_minute - usage.requests)
                           if budget.requests_per_minute else None,
                           "tokens_left": max(0, budget.tokens_per_minute - usage.tokens)
                           if budget.tokens_per_minute else None}
        return out
