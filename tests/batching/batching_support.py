"""Hand-built step views and a small stepper that runs a batching policy over many steps."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from sglang_fair.batching import (
    SLO,
    BatchingConfig,
    BatchingPolicy,
    BatchPlan,
    DecodeView,
    PrefillView,
    StepView,
    check_plan,
    make_batching_policy,
)
from sglang_fair.workloads.program import Call, Program

AZURE = SLO(ttft=2.0, tpot=0.05)  # [3] Table 2


def policy(name: str, **kw: object) -> BatchingPolicy:
    return make_batching_policy(BatchingConfig(policy=name, **kw))  # type: ignore[arg-type]


def dec(rid: str, *, tokens: int = 1, arrival: float = 0.0, first: float | None = None, last: float = 0.0,
        context: int = 100, slo: SLO = AZURE) -> DecodeView:
    """A running request; its first token came at ``first`` (default: ``last``)."""
    return DecodeView(rid, arrival, first_token_at=last if first is None else first, tokens=tokens,
                      last_token_at=last, context=context, slo=slo)


def pre(rid: str, left: int, *, arrival: float = 0.0, done: int = 0, started: bool = False,
        slo: SLO = AZURE) -> PrefillView:
    return PrefillView(rid, arrival, input_len=done + left, prefilled=done, slo=slo, started=started)


def step_time(plan: BatchPlan, view: StepView) -> tuple[int, int, float]:
    """(new tokens, KV read, seconds) of ``plan`` under a fixed linear 'GPU'."""
    ctx = {d.rid: d.context for d in view.decodes}
    done = {p.rid: p.prefilled for p in view.prefills}
    new = len(plan.decodes) + sum(n for _, n in plan.prefills)
    context = sum(ctx[r] + 1 for r in plan.decodes) + sum(done[r] + n for r, n in plan.prefills)
    return new, context, 0.01 + 1e-4 * new + 1e-7 * context


@dataclass
class Req:
    rid: str
    arrival: float
    input_len: int
    output_len: int
    slo: SLO
    prefilled: int = 0
    started: bool = False
    tokens: int = 0
    last: float = 0.0
    first: float = 0.0


@dataclass
class Stepper:
    """Runs ``policy`` for ``steps`` steps on random arrivals; records what a property needs."""

    policy: BatchingPolicy
    seed: int
    keep_prefilling: bool = False  # a prefill candidate is always waiting (a saturating stream)
    max_wait: dict[str, int] = field(default_factory=dict)  # running decode -> most steps it waited
    max_overdue: int = 0  # most steps a decode waited while its next token was past due ([3]'s envelope)
    over_budget: int = 0
    now: float = 0.0

    def run(self, steps: int, max_decodes: int) -> None:
        rng = random.Random(self.seed)
        slos = [SLO(0.5, 0.05), SLO(2.0, 0.2)]
        prefills: list[Req] = []
        decodes: list[Req] = []
        waited: dict[str, int] = {}
        overdue: dict[str, int] = {}
        n = 0
        for _ in range(steps):
            while (rng.random() < 0.3 or (self.keep_prefilling and not prefills)) and \
                    len(prefills) + len(decodes) < max_decodes:
                cached = rng.choice([0, 0, 5])
                prefills.append(Req(f"r{n}", self.now, cached + rng.randint(0, 3000), rng.randint(1, 60),
                                    rng.choice(slos), prefilled=cached))
                n += 1
            view = StepView(
                self.now,
                [DecodeView(r.rid, r.arrival, r.first, r.tokens, r.last, r.input_len + r.tokens, r.slo)
                 for r in decodes],
                [PrefillView(r.rid, r.arrival, r.input_len, r.prefilled, r.slo, started=r.started)
                 for r in prefills],
                kv_used=rng.randint(0, 100), kv_capacity=100,
            )
            plan = self.policy.plan(view)
            late = {d.rid for d in view.decodes if d.deadline < self.now}
            check_plan(view, plan)
            assert not plan.empty or (not decodes and not prefills), "idle with work to do"
            self.over_budget += plan.tokens > self.policy.token_budget
            new, context, seconds = step_time(plan, view)
            self.now += seconds
            self.policy.on_step(new, context, seconds)
            self._apply(plan, prefills, decodes)
            for r in decodes:
                waited[r.rid] = 0 if r.rid in plan.decodes else waited.get(r.rid, 0) + 1
                self.max_wait[r.rid] = max(self.max_wait.get(r.rid, 0), waited[r.rid])
                overdue[r.rid] = overdue.get(r.rid, 0) + 1 if waited[r.rid] and r.rid in late else 0
                self.max_overdue = max(self.max_overdue, overdue[r.rid])
            decodes[:] = [r for r in decodes if r.tokens < r.output_len]

    def _apply(self, plan: BatchPlan, prefills: list[Req], decodes: list[Req]) -> None:
        chosen = set(plan.decodes)
        for r in decodes:
            if r.rid in chosen:
                r.tokens += 1
                r.last = self.now
        chunks = dict(plan.prefills)
        for r in list(prefills):
            if r.rid in chunks:
                r.prefilled += chunks[r.rid]
                r.started = True
                if r.prefilled == r.input_len:
                    prefills.remove(r)
                    r.tokens, r.first, r.last = 1, self.now, self.now
                    if r.output_len > 1:
                        decodes.append(r)


def long_prompts(n: int = 40, gap: float = 0.25) -> list[Program]:
    """Single calls with long unique prompts (2-6k tokens) and 20-200 output tokens."""
    rng = random.Random(7)
    return [Program(i, f"c{i % 2}", i * gap, (Call((tuple(rng.randrange(1, 30000) for _ in range(
        rng.randint(2000, 6000))),), rng.randint(20, 200)),)) for i in range(n)]
