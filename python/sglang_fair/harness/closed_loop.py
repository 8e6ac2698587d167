"""Closed-loop ``/generate`` clients for the CPU end-to-end tests and benchmarks, as a view of the
harness's one load model (:class:`~sglang_fair.harness.traffic.Traffic`).

Each :class:`ClientSpec` runs ``concurrency`` threads that send ``/generate`` requests back to back
with the client's id in the identity header. When the window ends nothing new is sent; requests
still in flight are reported as *censored* with latency = window end - send time (a lower bound of
their true latency), so a starved client cannot look fast by never finishing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sglang_fair.harness.traffic import Record, Spec, Traffic

UNANSWERED = ("", "cut", "transport", "refused", "deadline")  # Record outcomes without an HTTP answer


@dataclass(frozen=True)
class ClientSpec:
    """One client: name, in-flight requests, prompt of its i-th request, output length."""

    name: str
    concurrency: int
    prompt: Callable[[int], str]
    max_tokens: int = 32
    headers: tuple[tuple[str, str], ...] = ()  # default: (("X-Client-Id", name),)

    def spec(self) -> Spec:
        """The client in the load model: closed loop, no wait after a 429."""
        return Spec(self.name, concurrency=self.concurrency, max_tokens=self.max_tokens, text=self.prompt,
                    headers=self.headers or (("X-Client-Id", self.name),), wait_429=0.0)


@dataclass
class Outcome:
    """One request: sent at ``sent``; ``latency`` None: no answer (in flight at the window's end, or
    lost); ``status`` 0: no HTTP answer."""

    sent: float
    latency: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    status: int = 0
    dp_rank: int | None = None  # the data-parallel worker that answered (SGLang's meta_info)

    @classmethod
    def of(cls, record: Record, end: float = math.inf) -> Outcome:
        """``record`` as answered by ``end``, or without its answer (censored) if it came later."""
        out = cls(sent=record.sent)
        if 0 < record.ended <= end and record.outcome not in UNANSWERED:
            out.latency, out.status = record.ended - record.sent, record.status
            out.prompt_tokens, out.cached_tokens = record.prompt_tokens, record.cached_tokens
            out.completion_tokens, out.dp_rank = record.completion_tokens, record.dp_rank
        return out


@dataclass
class ClientResult:
    name: str
    outcomes: list[Outcome] = field(default_factory=list)

    def done(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.latency is not None and o.status == 200]

    def latencies(self, end: float) -> list[float]:
        """Finished latencies plus censored ones (window end - send time) for the unfinished."""
        return [o.latency if o.latency is not None else end - o.sent for o in self.outcomes]


def generate(url: str, headers: dict[str, str], text: str, max_tokens: int, timeout: float) -> Outcome:
    """One blocking ``/generate`` request; returns its outcome (status 0 on a transport error)."""
    spec = Spec("generate", max_tokens=max_tokens, text=lambda _: text, headers=tuple(headers.items()))
    return Outcome.of(Traffic(url, [spec], deadline=timeout).send(spec, 0))


def run_load(url: str | Sequence[str], specs: list[ClientSpec],
             duration: float) -> tuple[dict[str, ClientResult], float]:
    """Run all clients for ``duration`` seconds against ``url`` (several: one request to each in turn,
    as a round-robin load balancer); return results (each client's requests in the order sent) and the
    window's end time."""
    end = time.monotonic() + duration
    traffic = Traffic(url, [s.spec() for s in specs], deadline=duration + 120, one_count=True)
    traffic.start(until=end)
    time.sleep(max(0.0, end - time.monotonic()))
    traffic.stop(wait=0.0)
    results = {s.name: ClientResult(s.name) for s in specs}
    for record in sorted(traffic.sent(), key=lambda r: r.index):
        results[record.client].outcomes.append(Outcome.of(record, end))
    return results, end
