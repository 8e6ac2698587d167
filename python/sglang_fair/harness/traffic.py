"""Keyed OpenAI traffic to one endpoint (the load balancer in front of the gateways), every request
recorded (``sglang-fair lab chaos``, ``sglang-fair lab cluster-soak``).

Each :class:`Spec` is one client: ``concurrency`` threads sending back to back (closed loop), or,
with ``rate``, requests started at Poisson times (open loop). A request is sent once: one cut after it
was sent is not sent again (the load balancer retries only a request that never reached a gateway).
Streams are chat completions read to ``[DONE]`` (an error event instead is a ``cut``); the others are
``/generate``. Every request ends as one :class:`Record` within ``deadline`` seconds (``deadline``: the
client gave up).
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.harness.scenario import words


@dataclass(frozen=True)
class Spec:
    """One client: its name and key, how it sends, what: prompts over one shared prefix of
    ``prefix_words`` words (0: none) plus ``words`` of its own, ``max_tokens`` out."""

    name: str
    key: str
    stream: bool
    concurrency: int = 1
    rate: float = 0.0  # requests per second, open loop (0: closed loop with `concurrency`)
    prefix_words: int = 0
    words: int = 30
    max_tokens: int = 16

    def prompt(self, i: int) -> str:
        seed = 1000 * (zlib.crc32(self.name.encode()) % 997)
        own = words(seed + 7 * i + 1, self.words)
        return f"{words(seed, self.prefix_words)} {own}" if self.prefix_words else own


@dataclass
class Record:
    client: str
    stream: bool
    sent: float
    ended: float = 0.0
    status: int = 0  # HTTP status of the last try (0: no answer)
    outcome: str = ""  # ok, cut, 503, 502 (the load balancer's), 429, 4xx, 5xx, transport, deadline, refused
    detail: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Traffic:
    """The clients of ``specs`` against ``endpoint`` until :meth:`stop`; ``records`` keeps them all."""

    def __init__(self, endpoint: str, specs: Sequence[Spec], deadline: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.endpoint, self.specs, self.deadline, self.clock = endpoint, list(specs), deadline, clock
        self.records: list[Record] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> Traffic:
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
        with self.lock:
            return list(self.records)

    def _closed_loop(self, spec: Spec, k: int) -> None:
        for i in itertools.count(k * 1_000_000):
            if self.stopping.is_set():
                return
            if self.send(spec, i).outcome == "429":  # over the client's bound: wait its Retry-After (1 s)
                self.stopping.wait(1.0)

    def _open_loop(self, spec: Spec, _: int) -> None:
        rng = random.Random(spec.name)
        next_at = self.clock()
        for i in itertools.count():
            next_at += rng.expovariate(spec.rate)
            if self.stopping.wait(max(0.0, next_at - self.clock())):
                return
            t = threading.Thread(target=self.send, args=(spec, i), daemon=True)
            t.start()
            self.threads.append(t)

    def send(self, spec: Spec, i: int) -> Record:
        """One request of ``spec``; its record (also kept)."""
        record = Record(spec.name, spec.stream, self.clock())
        self._one(self.endpoint, spec, i, record)
        record.ended = self.clock()
        with self.lock:
            self.records.append(record)
        return record

    def _one(self, gateway: str, spec: Spec, i: int, record: Record) -> None:
        headers = {"content-type": "application/json", "Authorization": f"Bearer {spec.key}"}
        if spec.stream:
            path, body = "/v1/chat/completions", {
                "model": "default", "messages": [{"role": "user", "content": spec.prompt(i)}],
                "max_tokens": spec.max_tokens, "stream": True, "stream_options": {"include_usage": True},
                "ignore_eos": True}
        else:
            path, body = "/generate", {"text": spec.prompt(i), "sampling_params": {
                "max_new_tokens": spec.max_tokens, "ignore_eos": True}}
        req = urllib.request.Request(gateway + path, data=json.dumps(body).encode(), headers=headers)
        left = max(0.1, record.sent + self.deadline - self.clock())
        try:
            with urllib.request.urlopen(req, timeout=left) as resp:
                record.status = resp.status
                read_stream(resp, record, record.sent + self.deadline, self.clock) if spec.stream \
                    else read_whole(resp, record)
        except urllib.error.HTTPError as err:
            record.status = err.code
            record.detail = err.read().decode(errors="replace")[:300]
            record.outcome = str(err.code) if err.code in (429, 502, 503) else f"{err.code // 100}xx"
        except urllib.error.URLError as err:
            if isinstance(err.reason, ConnectionRefusedError):
                record.outcome, record.detail = "refused", f"{gateway}: {err.reason}"
            else:
                self._failed(record, err.reason)
        except (OSError, http.client.HTTPException) as err:  # after sending: not sent again (POST)
            self._failed(record, err)

    def _failed(self, record: Record, err: object) -> None:
        late = self.clock() >= record.sent + self.deadline - 0.5
        record.outcome, record.detail = ("deadline" if late else "transport"), f"{type(err).__name__}: {err}"


def read_whole(resp: Any, record: Record) -> None:
    meta = json.loads(resp.read())["meta_info"]
    record.prompt_tokens, record.completion_tokens = meta["prompt_tokens"], meta["completion_tokens"]
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
