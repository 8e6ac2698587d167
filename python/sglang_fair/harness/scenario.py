"""The CPU end-to-end scenario: a heavy shared-prefix flood, a backlogged client and a light client.

* ``heavy``: ``heavy_concurrency`` requests in flight, each a long shared prefix plus a short question
  (the radix cache holds the prefix, so each costs little extend);
* ``medium``: ``medium_concurrency`` requests in flight of unique mid-length prompts (backlogged, uncached);
* ``light`` (and ``light2``, ... with ``light_clients`` > 1): one unique short prompt at a time.
Every request asks for ``max_tokens`` output tokens with ``ignore_eos``. The summary gives the light
client's latency percentiles (censored, see :mod:`closed_loop`), requests done per client, the prefix-cache
hit rate (cached / prompt tokens over finished requests) and, for fair policies, the service each
client received between two ``/fairness`` snapshots taken while all clients were backlogged.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.harness.closed_loop import ClientResult, ClientSpec, run_load
from sglang_fair.harness.server import get_json
from sglang_fair.harness.traffic import words as words  # also the tests'
from sglang_fair.metrics.stats import percentile


@dataclass(frozen=True)
class Workload:
    prefix_words: int = 1300
    question_words: int = 12
    medium_words: int = 180
    light_words: int = 160
    heavy_concurrency: int = 24
    medium_concurrency: int = 6
    max_tokens: int = 32
    light_clients: int = 1  # named light, light2, light3, ...
    keys: dict[str, str] = field(default_factory=dict)  # client -> API key (empty: header identity)
    admin_key: str = ""  # a --fairness-admins client's key, to read every client at /fairness

    def specs(self) -> list[ClientSpec]:
        prefix = words(1, self.prefix_words)

        def heavy(i: int) -> str:
            return f"{prefix} {words(10_000 + i, self.question_words)}"

        def medium(i: int) -> str:
            return words(20_000 + i, self.medium_words)

        def headers(name: str) -> tuple[tuple[str, str], ...]:
            key = self.keys.get(name)
            return (("Authorization", f"Bearer {key}"),) if key else ()

        def light_n(k: int) -> Callable[[int], str]:
            return lambda i: words(30_000 + 1_000 * k + i, self.light_words)

        specs = [ClientSpec("heavy", self.heavy_concurrency, heavy, self.max_tokens, headers("heavy"))]
        if self.medium_concurrency:
            specs.append(ClientSpec("medium", self.medium_concurrency, medium, self.max_tokens,
                                    headers("medium")))
        for k, name in enumerate(self.light_names()):
            specs.append(ClientSpec(name, 1, light_n(k), self.max_tokens, headers(name)))
        return specs

    def light_names(self) -> list[str]:
        return ["light"] + [f"light{k + 1}" for k in range(1, self.light_clients)]


@dataclass
class Summary:
    light_p50: float
    light_p99: float
    done: dict[str, int]
    hit_rate: float
    output_tokens_per_s: float
    client_hit_rate: dict[str, float]  # per client: cached / prompt tokens of its finished requests
    client_p50: dict[str, float]  # per client: median latency (censored, as the light percentiles)
    service_delta: dict[str, float]  # from /fairness between the snapshots (fair policies only)

    def row(self) -> dict[str, Any]:
        return {
            "light_p50_s": round(self.light_p50, 3), "light_p99_s": round(self.light_p99, 3),
            "done": self.done, "hit_rate": round(self.hit_rate, 4),
            "output_tok_per_s": round(self.output_tokens_per_s, 1),
            "client_hit_rate": {k: round(v, 4) for k, v in self.client_hit_rate.items()},
            "client_p50_s": {k: round(v, 3) for k, v in self.client_p50.items()},
            "service_delta": {k: round(v, 1) for k, v in self.service_delta.items()},
        }


def _snapshots(url: str, times: tuple[float, float], headers: dict[str, str]) -> list[dict[str, Any]]:
    taken: list[dict[str, Any]] = []

    def take() -> None:
        start = time.monotonic()
        for at in times:
            time.sleep(max(0.0, start + at - time.monotonic()))
            taken.append(get_json(url + "/fairness", headers=headers).get("clients", {}))

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    thread.join(times[-1] + 30)
    return taken


def run_scenario(url: str, workload: Workload, duration: float, warm: float = 4.0) -> Summary:
    """Run the workload for ``duration`` s; snapshot ``/fairness`` at ``warm`` s and 1 s before the end."""
    holder: dict[str, Any] = {}

    def load() -> None:
        holder["results"], holder["end"] = run_load(url, workload.specs(), duration)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    admin = {"Authorization": f"Bearer {workload.admin_key}"} if workload.admin_key else {}
    snaps = _snapshots(url, (warm, duration - 1.0), admin)
    thread.join(duration + 60)
    return summarize(holder["results"], holder["end"], duration, snaps)


def summarize(
    results: dict[str, ClientResult], end: float, duration: float, snaps: list[dict[str, Any]]
) -> Summary:
    light = [x for name, r in results.items() if name.startswith("light") for x in r.latencies(end)]
    done = {name: len(r.done()) for name, r in results.items()}
    finished = [o for r in results.values() for o in r.done()]
    out_tokens = sum(o.completion_tokens for o in finished)
    delta: dict[str, float] = {}
    if len(snaps) == 2:
        for client in sorted(results):
            before = (snaps[0].get(client) or {}).get("service", 0.0)
            after = (snaps[1].get(client) or {}).get("service", 0.0)
            delta[client] = float(after) - float(before)
    hits = {name: _hit_rate(r.done()) for name, r in results.items()}
    return Summary(
        light_p50=percentile(light, 50, nearest_rank=True),
        light_p99=percentile(light, 99, nearest_rank=True),
        done=done,
        hit_rate=_hit_rate(finished), output_tokens_per_s=out_tokens / duration,
        service_delta=delta, client_hit_rate=hits,
        client_p50={name: percentile(r.latencies(end), 50, nearest_rank=True) for name, r in results.items()},
    )


def _hit_rate(finished: list[Any]) -> float:
    prompt = sum(o.prompt_tokens for o in finished)
    return sum(o.cached_tokens for o in finished) / prompt if prompt else 0.0
