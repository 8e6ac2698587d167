"""The data-parallel end-to-end scenario: one client's shared-prefix programs against light clients.

* ``heavy``: ``heavy_concurrency`` requests in flight; its i-th request is program ``i % programs``:
  that program's long prefix plus a short question (so each program's prefix is worth caching on
  one worker);
* ``light-1`` .. ``light-N``: one unique short prompt at a time each.
The summary gives, per worker, the prefix-cache hit rate; per heavy program, the share of its
requests its most-used worker served (1.0: perfect locality, 1/N: scattered); per client, service
(w_e x uncached prompt tokens + w_q x output tokens per second, from the responses) and Jain's index
over it; the light clients' latency (censored, see :mod:`closed_loop`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.core.cost import CostModel
from sglang_fair.harness.closed_loop import ClientResult, ClientSpec, Outcome, run_load
from sglang_fair.harness.traffic import words
from sglang_fair.metrics.ledger import ServiceLedger
from sglang_fair.metrics.stats import jain_index, percentile


@dataclass(frozen=True)
class DPWorkload:
    programs: int = 5  # odd: round robin's alternation does not line up with the programs
    prefix_words: int = 1000
    question_words: int = 12
    light_words: int = 160
    light_clients: int = 2
    heavy_concurrency: int = 32
    max_tokens: int = 32
    keys: dict[str, str] = field(default_factory=dict)  # client -> API key (empty: header identity)

    def program_of(self, i: int) -> int:
        return i % self.programs

    def headers(self, name: str) -> tuple[tuple[str, str], ...]:
        key = self.keys.get(name)
        return (("Authorization", f"Bearer {key}"),) if key else ()

    def specs(self) -> list[ClientSpec]:
        prefixes = [words(100 + p, self.prefix_words) for p in range(self.programs)]

        def heavy(i: int) -> str:
            return f"{prefixes[self.program_of(i)]} {words(10_000 + i, self.question_words)}"

        def light(offset: int) -> Any:
            return lambda i: words(offset + i, self.light_words)

        lights = [ClientSpec(f"light-{k + 1}", 1, light(30_000 + 10_000 * k), self.max_tokens,
                             self.headers(f"light-{k + 1}")) for k in range(self.light_clients)]
        return [ClientSpec("heavy", self.heavy_concurrency, heavy, self.max_tokens, self.headers("heavy")),
                *lights]


@dataclass
class DPSummary:
    light_p50: float
    light_p99: float
    done: dict[str, int]
    hit_rate_per_worker: dict[int, float]
    locality: float  # mean over heavy programs of the share served by their most-used worker
    service: dict[str, float]  # per client, cost units per second
    jain: float
    output_tokens_per_s: float

    def row(self) -> dict[str, Any]:
        return {
            "light_p50_s": round(self.light_p50, 3), "light_p99_s": round(self.light_p99, 3),
            "done": self.done, "locality": round(self.locality, 3), "jain": round(self.jain, 3),
            "hit_rate_per_worker": {w: round(h, 3) for w, h in self.hit_rate_per_worker.items()},
            "service_per_s": {c: round(s, 1) for c, s in self.service.items()},
            "output_tok_per_s": round(self.output_tokens_per_s, 1),
        }


def run_dp_scenario(url: str, workload: DPWorkload, duration: float,
                    cost: CostModel | None = None) -> DPSummary:
    results, end = run_load(url, workload.specs(), duration)
    return summarize_dp(results, end, duration, workload, cost or CostModel())


def summarize_dp(results: dict[str, ClientResult], end: float, duration: float, workload: DPWorkload,
                 cost: CostModel) -> DPSummary:
    finished = {name: r.done() for name, r in results.items()}
    light = [x for name, r in results.items() if name != "heavy" for x in r.latencies(end)]
    ledger = ServiceLedger(cost, window=None)
    for name, outs in finished.items():
        for o in outs:
            ledger.book(0.0, name, requests=1, input_tokens=o.prompt_tokens, cached_tokens=o.cached_tokens,
                        extend_tokens=o.prompt_tokens - o.cached_tokens, output_tokens=o.completion_tokens)
    service = {name: ledger.total(name, "actual") / duration for name in finished}
    all_done = [o for outs in finished.values() for o in outs]
    return DPSummary(
        light_p50=percentile(light, 50, nearest_rank=True),
        light_p99=percentile(light, 99, nearest_rank=True),
        done={name: len(outs) for name, outs in finished.items()},
        hit_rate_per_worker=_hit_rates(all_done), locality=_locality(results["heavy"], workload),
        service=service, jain=jain_index(list(service.values())),
        output_tokens_per_s=sum(o.completion_tokens for o in all_done) / duration,
    )


def _hit_rates(outcomes: list[Outcome]) -> dict[int, float]:
    prompt: defaultdict[int, int] = defaultdict(int)
    cached: defaultdict[int, int] = defaultdict(int)
    for o in outcomes:
        if o.dp_rank is not None:
            prompt[o.dp_rank] += o.prompt_tokens
            cached[o.dp_rank] += o.cached_tokens
    return {w: cached[w] / prompt[w] for w in sorted(prompt) if prompt[w]}


def _locality(heavy: ClientResult, workload: DPWorkload) -> float:
    per_program: defaultdict[int, Counter[int]] = defaultdict(Counter)
    for i, o in enumerate(heavy.outcomes):  # outcomes are appended in request-index order
        if o.status == 200 and o.dp_rank is not None:
            per_program[workload.program_of(i)][o.dp_rank] += 1
    shares = [max(c.values()) / sum(c.values()) for c in per_program.values() if c]
    return sum(shares) / len(shares) if shares else float("nan")


@dataclass(frozen=True)
class WeightedWorkload:
    """Two heavy clients of weights 4 and 1 (``serve --client-weights heavy-a=4,heavy-b=1``), each with
    ``concurrency`` requests over its own prefix in flight: both backlogged, so DLPM splits the service
    4:1. The summary's ``service_per_s`` gives the ratio."""

    concurrency: int = 24
    prefix_words: int = 300
    question_words: int = 12
    max_tokens: int = 32
    weights: tuple[tuple[str, float], ...] = (("heavy-a", 4.0), ("heavy-b", 1.0))

    def flag(self) -> str:
        return ",".join(f"{name}={w:g}" for name, w in self.weights)

    def specs(self) -> list[ClientSpec]:
        out = []
        for k, (name, _) in enumerate(self.weights):
            prefix = words(500 + k, self.prefix_words)

            def prompt(i: int, prefix: str = prefix, k: int = k) -> str:
                return f"{prefix} {words(50_000 * (k + 1) + i, self.question_words)}"

            out.append(ClientSpec(name, self.concurrency, prompt, self.max_tokens))
        return out


def run_weighted(url: str, workload: WeightedWorkload, duration: float) -> dict[str, Any]:
    """Both clients for ``duration`` seconds: each one's service per second (w_e x uncached prompt +
    w_q x output tokens, from the responses) and the ratio of the first to the second."""
    results, _ = run_load(url, workload.specs(), duration)
    ledger = ServiceLedger(CostModel(), window=None)
    for name, r in results.items():
        for o in r.done():
            ledger.book(0.0, name, requests=1, input_tokens=o.prompt_tokens, cached_tokens=o.cached_tokens,
                        extend_tokens=o.prompt_tokens - o.cached_tokens, output_tokens=o.completion_tokens)
    service = {name: ledger.total(name, "actual") / duration for name in results}
    (a, _), (b, _) = workload.weights
    return {"service_per_s": {c: round(s, 1) for c, s in service.items()},
            "done": {name: len(r.done()) for name, r in results.items()},
            "ratio": round(service[a] / service[b], 3) if service[b] else None}
