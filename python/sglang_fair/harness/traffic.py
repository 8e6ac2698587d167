"""The harness's one load model: keyed traffic to one endpoint or several in turn, every request
recorded (``sglang-fair lab chaos``, ``sglang-fair lab cluster-soak``; ``closed_loop.run_load`` is a
view of it).

Each :class:`Spec` is one client: ``concurrency`` threads sending back to back (closed loop), or,
with ``rate``, requests started at Poisson times (open loop). A request is sent once: one cut after it
was sent is not sent again (the load balancer retries only a request that never reached a gateway).
Streams are chat completions read to ``[DONE]`` (an error event instead is a ``cut``); the others are
``/generate``. Every request ends as one :class:`Record` within ``deadline`` seconds (``deadline``: the
client gave up).
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import math
import random
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# The words scripts/make_tiny_model.py trains its tokenizer on, so one word is about one token.
VOCAB = [
    "the", "a", "service", "client", "request", "token", "cache", "prefix", "fair", "share",
    "queue", "light", "heavy", "model", "server", "batch", "decode", "prefill", "answer",
    "question", "system", "user", "assistant", "data", "time", "order", "first", "next", "round",
]


def words(seed: int, n: int) -> str:
    """``n`` words of :data:`VOCAB` drawn by ``seed``."""
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCAB) for _ in range(n))


@dataclass(frozen=True)
class Spec:
    """One client: its name and key (``""``: none; ``headers`` are sent too), how it sends, what: the
    ``text`` of its i-th request, or prompts over one shared prefix of ``prefix_words`` words (0: none)
    plus ``words`` of its own; ``max_tokens`` out. A closed-loop thread answered 429 waits ``wait_429``
    seconds (the gateway's Retry-After) before its next request."""

    name: str
    key: str = ""
    stream: bool = False
    concurrency: int = 1
    rate: float = 0.0  # requests per second, open loop (0: closed loop with `concurrency`)
    prefix_words: int = 0
    words: int = 30
    max_tokens: int = 16
    text: Callable[[int], str] | None = None
    headers: tuple[tuple[str, str], ...] = ()
    wait_429: float = 1.0

    def prompt(self, i: int) -> str:
        if self.text is not None:
            return self.text(i)
        seed = 1000 * (zlib.crc32(self.name.encode()) % 997)
        own = words(seed + 7 * i + 1, self.words)
        return f"{words(seed, self.prefix_words)} {own}" if self.prefix_words else own

    def request(self, i: int) -> tuple[str, dict[str, Any], dict[str, str]]:
        """The path, body and headers of request ``i``."""
        headers = {"content-type": "application/json", **dict(self.headers)}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        if self.stream:
            return "/v1/chat/completions", {
                "model": "default", "messages": [{"role": "user", "content": self.prompt(i)}],
                "max_tokens": self.max_tokens, "stream": True, "stream_options": {"include_usage": True},
                "ignore_eos": True}, headers
        return "/generate", {"text": self.prompt(i), "sampling_params": {
            "max_new_tokens": self.max_tokens, "ignore_eos": True}}, headers


@dataclass
class Record:
    """One request of client ``client``: when it was sent and ended (clock times), how, what it got."""

    client: str
    stream: bool
    sent: float
    ended: float = 0.0  # 0: in flight
    status: int = 0  # HTTP status of the last try (0: no answer)
    outcome: str = ""  # ok, cut, 503, 502 (the load balancer's), 429, 4xx, 5xx, transport, deadline, refused
    detail: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    index: int = 0  # the i of Spec.prompt
    cached_tokens: int = 0  # /generate's meta_info
    dp_rank: int | None = None  # the data-parallel worker that answered (/generate's meta_info)


class Traffic:
    """The clients of ``specs`` against ``endpoint`` (several: one request to each in turn, as a
    round-robin load balancer) until :meth:`stop`; ``records`` keeps every answered request.

    A closed-loop thread ``k`` numbers its requests ``k`` x 1,000,000 + 0, 1, ...; with ``one_count``
    a client's threads share one count 0, 1, 2, ... in the order they send."""

    def __init__(self, endpoint: str | Sequence[str], specs: Sequence[Spec], deadline: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, one_count: bool = False) -> None:
        self.endpoints = [endpoint] if isinstance(endpoint, str) else list(endpoint)
        self.specs, self.deadline, self.clock, self.one_count = list(specs), deadline, clock, one_count
        self.records: list[Record] = []
        self.flying: dict[int, Record] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.until = math.inf
        self.counts = {s.name: itertools.count() for s in self.specs}
        self.turn = itertools.count()

    def start(self, until: float | None = None) -> Traffic:
        """Start every client; with ``until`` (a time of ``clock``) nothing new is sent from then on."""
        self.until = math.inf if until is None else until
        for spec in self.specs:
            loops = [self._open_loop] if spec.rate > 0 else [self._closed_loop] * spec.concurrency
            for k, loop in enumerate(loops):
                t = threading.Thread(target=loop, args=(spec, k), daemon=True, name=f"{spec.name}-{k}")
                t.start()
                self.threads.append(t)
        return self

    def stop(self, wait: float | None = None) -> None:
        """Send nothing new; wait for the requests in flight (at most ``deadline`` + 10 s)."""
        self.stopping.set()
        end = self.clock() + (self.deadline + 10 if wait is None else wait)
        for t in self.threads:
            t.join(max(0.0, end - self.clock()))

    def snapshot(self) -> list[Record]:
        """The answered requests, in the order they ended."""
        with self.lock:
            return list(self.records)

    def sent(self) -> list[Record]:
        """Every request sent so far: the answered ones and those in flight (``ended`` 0)."""
        with self.lock:
            return [*self.records, *self.flying.values()]

    def sending(self) -> bool:
        return not self.stopping.is_set() and self.clock() < self.until

    def _closed_loop(self, spec: Spec, k: int) -> None:
        own = itertools.count(k * 1_000_000)
        while self.sending():
            i = next(self.counts[spec.name] if self.one_count else own)
            if self.send(spec, i).outcome == "429" and spec.wait_429 > 0:
                self.stopping.wait(spec.wait_429)

    def _open_loop(self, spec: Spec, _: int) -> None:
        rng = random.Random(spec.name)
        next_at = self.clock()
        for i in itertools.count():
            next_at += rng.expovariate(spec.rate)
            if self.stopping.wait(max(0.0, next_at - self.clock())) or not self.sending():
                return
            t = threading.Thread(target=self.send, args=(spec, i), daemon=True)
            t.start()
            self.threads.append(t)

    def send(self, spec: Spec, i: int) -> Record:
        """One request of ``spec`` (to the next endpoint in turn); its record (also kept)."""
        with self.lock:
            record = Record(spec.name, spec.stream, self.clock(), index=i)
            endpoint = self.endpoints[next(self.turn) % len(self.endpoints)]
            self.flying[id(record)] = record
        self._one(endpoint, spec, i, record)
        record.ended = self.clock()
        with self.lock:
            del self.flying[id(record)]
            self.records.append(record)
        return record

    def _one(self, endpoint: str, spec: Spec, i: int, record: Record) -> None:
        path, body, headers = spec.request(i)
        req = urllib.request.Request(endpoint + path, data=json.dumps(body).encode(), headers=headers)
        left = max(0.1, record.sent + self.deadline - self.clock())
        try:
            with urllib.request.urlopen(req, timeout=left) as resp:
                record.status = resp.status
                read_stream(resp, record, record.sent + self.deadline, self.clock) if spec.stream \
                    else read_whole(resp, record)
        except urllib.error.HTTPError as err:
            record.status = err.code
            record.outcome = str(err.code) if err.code in (429, 502, 503) else f"{err.code // 100}xx"
            with contextlib.suppress(OSError, http.client.HTTPException):
                record.detail = err.read().decode(errors="replace")[:300]
        except urllib.error.URLError as err:
            if isinstance(err.reason, ConnectionRefusedError):
                record.outcome, record.detail = "refused", f"{endpoint}: {err.reason}"
            else:
                self._failed(record, err.reason)
        except (OSError, http.client.HTTPException, ValueError, KeyError) as err:  # after sending: not again
            self._failed(record, err)

    def _failed(self, record: Record, err: object) -> None:
        late = self.clock() >= record.sent + self.deadline - 0.5
        record.outcome, record.detail = ("deadline" if late else "transport"), f"{type(err).__name__}: {err}"


def read_whole(resp: Any, record: Record) -> None:
    """A ``/generate`` answer's token counts and worker (``meta_info``)."""
    meta: dict[str, Any] = json.loads(resp.read())["meta_info"]
    record.prompt_tokens, record.cached_tokens = meta.get("prompt_tokens", 0), meta.get("cached_tokens", 0)
    record.completion_tokens, record.dp_rank = meta.get("completion_tokens", 0), meta.get("dp_rank")
    record.outcome = "ok"


def read_stream(resp: Any, record: Record, deadline: float, clock: Callable[[], float]) -> None:
    """Read SSE lines to ``[DONE]`` (ok), an error event (cut), or the deadline."""
    for raw in resp:
        if clock() > deadline:
            record.outcome, record.detail = "deadline", "the stream was still going at the deadline"
            return
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            record.outcome = "ok" if record.outcome != "cut" else "cut"
            return
        chunk: dict[str, Any] = json.loads(line[6:])
        if "error" in chunk:
            record.outcome, record.detail = "cut", json.dumps(chunk["error"])[:300]
        usage = chunk.get("usage") or {}
        if usage:
            record.prompt_tokens = usage.get("prompt_tokens", 0)
            record.completion_tokens = usage.get("completion_tokens", 0)
    if not record.outcome:
        record.outcome, record.detail = "transport", "the stream ended without [DONE]"


@dataclass
class SlowReader:
    """A client that reads one chunk of a long stream, then nothing for ``hold`` seconds."""

    gateway: str
    key: str
    hold: float
    record: Record | None = field(default=None, init=False)

    def run(self, clock: Callable[[], float] = time.monotonic) -> Record:
        record = Record("slow-reader", True, clock())
        body = {"model": "default", "messages": [{"role": "user", "content": words(77, 40)}],
                "max_tokens": 400, "stream": True, "ignore_eos": True}
        req = urllib.request.Request(self.gateway + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json",
                                              "Authorization": f"Bearer {self.key}"})
        try:
            with urllib.request.urlopen(req, timeout=self.hold + 60) as resp:
                record.status = resp.status
                resp.readline()
                time.sleep(self.hold)
                read_stream(resp, record, clock() + 120, clock)
        except (OSError, http.client.HTTPException) as err:
            record.outcome, record.detail = "transport", f"{type(err).__name__}: {err}"
        record.ended = clock()
        self.record = record
        return record
