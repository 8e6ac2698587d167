"""Workloads, runs and verdicts for the fairness-bound property tests.

A bound check proves something only where it could fail. Over a stretch of steps in which two
clients are both backlogged, their service difference can never exceed the service the two received
together; so an example *exposes* a bound only if some pair's combined service over one such stretch
exceeds it. Each property test counts its exposed examples (:class:`Tally`) and fails unless most
are, and each has a negative control: the same test, generator and example budget with the fair
policy swapped for its unfair baseline must find a counterexample.

The generator makes the contention the theorems are about: every client sends a burst of requests
(arrival times spread over a few steps), some over a shared prefix of their own (the locality LPM
rewards), some unique, into a KV pool small enough to hold only a few requests at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sglang_fair.core.cost import CostModel
from sglang_fair.sim.backlog import BacklogRecorder
from sglang_fair.sim.request import EngineRequest
from support import req

Spec = tuple[int, str, list[int], int, int]  # rid, client, tokens, output_len, arrival
EXAMPLES = 150
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Negative controls: the same budget, deterministic, no shrinking (only "is a counterexample found?").
CONTROL = settings(PROPERTY, derandomize=True, database=None, phases=[Phase.generate])
COST = CostModel()


@dataclass
class Workload:
    specs: list[Spec]
    capacity: int  # M: KV pool tokens per worker
    quantum: float  # Q^u
    router_quantum: float = 100.0  # Q^w
    workers: int = 1
    weights: dict[str, float] = field(default_factory=dict)

    def __repr__(self) -> str:  # short: hypothesis prints failing examples (rerun with its seed)
        return (f"Workload({len(self.specs)} requests of {self.clients}, M={self.capacity}, "
                f"Q^u={self.quantum}, Q^w={self.router_quantum}, workers={self.workers}, "
                f"weights={self.weights})")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # hypothesis's printer
        printer.text(repr(self))

    @property
    def requests(self) -> list[EngineRequest]:
        """Fresh requests (a run mutates the ones it serves)."""
        out = []
        for rid, client, tokens, output, arrival in self.specs:
            r = req(rid, client, list(tokens), output, arrival)
            r.output_ids = [900_000 + rid * 100 + i for i in range(output)]
            out.append(r)
        return out

    @property
    def clients(self) -> list[str]:
        return sorted({c for _, c, _, _, _ in self.specs})

    @property
    def l_input(self) -> int:
        return max(len(tokens) for _, _, tokens, _, _ in self.specs)

    def u(self, cost: CostModel) -> float:
        """U = w_e * L_input + w_q * M of [1] Thm 4.1."""
        return cost.w_e * self.l_input + cost.w_q * self.capacity

    @property
    def cost(self) -> CostModel:
        return CostModel(client_weights=self.weights)


@st.composite
def contended(draw: st.DrawFn, max_clients: int = 3, requests: tuple[int, int] = (6, 30),
              workers: tuple[int, int] = (1, 1), weights: bool = False) -> Workload:
    """Bursts of requests from 2..max_clients clients; see the module docstring."""
    n_clients = draw(st.integers(2, max_clients))
    capacity = draw(st.integers(32, 96))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    specs: list[Spec] = []
    for c in range(n_clients):
        shared = draw(st.sampled_from([0, 6, 12, 24]))  # the client's prefix; 0: unique prompts
        count = draw(st.integers(*requests))
        start, spread = draw(st.integers(0, 12)), draw(st.integers(0, 24))
        for _ in range(count):
            rid = len(specs)
            unique, output = rng.randint(1, 12), rng.randint(1, 8)
            group = rng.randint(0, 1)
            prefix = min(shared, capacity - unique - output)
            tokens = [c * 10_000 + group * 1_000 + i for i in range(prefix)]
            tokens += [100_000 + rid * 100 + i for i in range(unique)]
            specs.append((rid, f"c{c}", tokens, output, start + rng.randint(0, spread)))
    w = Workload(specs, capacity, float(draw(st.integers(1, 64))),
                 router_quantum=float(draw(st.integers(1, 200))), workers=draw(st.integers(*workers)))
    if weights:
        w.weights = {f"c{c}": draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])) for c in range(n_clients)}
    return w


@dataclass
class Verdict:
    """One run against one bound: the largest backlogged difference and whether it was exposed."""

    worst: float  # largest (difference / bound) over client pairs
    exposed: bool  # some pair's combined service over one backlogged stretch exceeded its bound

    @classmethod
    def of(cls, rec: BacklogRecorder, bound: Callable[[str, str], float]) -> Verdict:
        pairs = list(combinations(rec.clients, 2))
        worst = max((rec.pair_max_diff(f, g) / bound(f, g) for f, g in pairs), default=0.0)
        exposed = any(rec.pair_max_stretch_service(f, g) > bound(f, g) for f, g in pairs)
        return cls(worst, exposed)


@dataclass
class Tally:
    """How many examples a property test ran and how many exposed its bound."""

    examples: int = 0
    exposed: int = 0

    def add(self, verdict: Verdict) -> None:
        self.examples += 1
        self.exposed += verdict.exposed

    def require_mostly_exposed(self) -> None:
        assert self.examples > 0
        share = self.exposed / self.examples
        assert share >= 0.5, f"only {self.exposed} of {self.examples} examples exposed the bound"


Run = Callable[[Workload], "Verdict"]


def check_bound(run: Run, strategy: st.SearchStrategy[Workload],
                config: settings = PROPERTY) -> Tally:
    """Run the property ``run(w).worst <= 1`` over ``strategy``; return the tally of exposures.
    Raises AssertionError (from hypothesis) with the counterexample when the bound is broken."""
    tally = Tally()

    @config
    @given(strategy)
    def bound_holds(w: Workload) -> None:
        verdict = run(w)
        tally.add(verdict)
        assert verdict.worst <= 1.0, f"service difference {verdict.worst:.2f} x the bound"

    bound_holds()
    return tally


def counterexample_found(run: Run, strategy: st.SearchStrategy[Workload]) -> bool:
    """Does the same property, with the control settings, find a run that breaks the bound?"""
    try:
        check_bound(run, strategy, CONTROL)
    except AssertionError as err:
        return "x the bound" in str(err)
    return False
