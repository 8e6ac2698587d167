"""A small closed-loop HTTP load generator for the CPU end-to-end tests and benchmarks (stdlib only).

Each :class:`ClientSpec` runs ``concurrency`` threads that send ``/generate`` requests back to back
with the client's id in the identity header. When the window ends nothing new is sent; requests
still in flight are reported as *censored* with latency = window end - send time (a lower bound of
their true latency), so a starved client cannot look fast by never finishing.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClientSpec:
    """One client: name, in-flight requests, prompt of its i-th request, output length."""

    name: str
    concurrency: int
    prompt: Callable[[int], str]
    max_tokens: int = 32
    headers: tuple[tuple[str, str], ...] = ()  # default: (("X-Client-Id", name),)


@dataclass
class Outcome:
    sent: float
    latency: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    status: int = 0
    dp_rank: int | None = None  # the data-parallel worker that answered (SGLang's meta_info)


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
    body = json.dumps({"text": text, "sampling_params": {"max_new_tokens": max_tokens, "ignore_eos": True}})
    req = urllib.request.Request(
        url + "/generate", data=body.encode(), method="POST",
        headers={"content-type": "application/json", **headers},
    )
    out = Outcome(sent=time.monotonic())
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            meta: dict[str, Any] = json.loads(resp.read())["meta_info"]
            out.status = resp.status
    except urllib.error.HTTPError as err:
        out.status = err.code
        out.latency = time.monotonic() - out.sent
        return out
    except OSError:
        return out
    out.latency = time.monotonic() - out.sent
    out.prompt_tokens = int(meta.get("prompt_tokens", 0))
    out.cached_tokens = int(meta.get("cached_tokens", 0))
    out.completion_tokens = int(meta.get("completion_tokens", 0))
    out.dp_rank = meta.get("dp_rank")
    return out


def run_load(url: str | Sequence[str], specs: list[ClientSpec],
             duration: float) -> tuple[dict[str, ClientResult], float]:
    """Run all clients for ``duration`` seconds against ``url`` (several: one request to each in turn,
    as a round-robin load balancer); return results and the window's end time."""
    urls = [url] if isinstance(url, str) else list(url)
    results = {s.name: ClientResult(s.name) for s in specs}
    lock = threading.Lock()
    end = time.monotonic() + duration
    counters = {s.name: 0 for s in specs}
    turn = itertools.count()

    def worker(spec: ClientSpec) -> None:
        while time.monotonic() < end:
            with lock:
                i = counters[spec.name]
                counters[spec.name] += 1
                outcome = Outcome(sent=time.monotonic())
                results[spec.name].outcomes.append(outcome)
                target = urls[next(turn) % len(urls)]
            headers = dict(spec.headers or (("X-Client-Id", spec.name),))
            got = generate(target, headers, spec.prompt(i), spec.max_tokens, timeout=duration + 120)
            if time.monotonic() <= end:
                outcome.latency, outcome.status = got.latency, got.status
                outcome.prompt_tokens, outcome.cached_tokens = got.prompt_tokens, got.cached_tokens
                outcome.completion_tokens, outcome.dp_rank = got.completion_tokens, got.dp_rank

    threads = [
        threading.Thread(target=worker, args=(s,), daemon=True) for s in specs for _ in range(s.concurrency)
    ]
    for t in threads:
        t.start()
    time.sleep(max(0.0, end - time.monotonic()))
    return results, end
