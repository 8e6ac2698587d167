"""``sglang-fair bench-router``: router overhead through its real ZMQ sockets.

The router runs in its own process, exactly as served. One load process plays the frontend and
``workers`` fast fake workers (each dispatch is answered with a Finished at once, heartbeats flow).
Prompts are ``prompt_len`` tokens from ``clients`` clients, on shared documents so the global
tree is exercised. Measured: the sustained dispatch rate (send as fast as the router takes them),
and the added latency (frontend send -> worker receive) at a fixed offered rate.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import statistics
import time
from dataclasses import dataclass, field

import zmq

from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router import worker_msgs as wm
from sglang_fair_router.codec import encode
from sglang_fair_router.config import ServiceConfig


@dataclass(frozen=True)
class BenchRouterConfig:
    workers: int = field(default=8, metadata={"help": "fake workers"})
    clients: int = field(default=64, metadata={"help": "clients"})
    prompt_len: int = field(default=2048, metadata={"help": "tokens per prompt"})
    requests: int = field(default=20000, metadata={"help": "requests in the throughput phase"})
    rate: float = field(default=5000.0, metadata={"help": "offered rate of the latency phase (req/s)"})
    seconds: float = field(default=4.0, metadata={"help": "length of the latency phase"})
    policy: str = field(default="d2lpm", metadata={"help": "routing policy"})
    port: int = field(default=29700, metadata={"help": "first of the local TCP ports used"})
    json: str = field(default="", metadata={"help": "also write the figures to this JSON file"})


def _router_process(service: ServiceConfig, routing: RouterConfig) -> None:
    from sglang_fair_router.service import RouterService

    RouterService(service, make_routing_policy(routing)).serve_forever(poll_ms=5)


class Load:
    """Frontend + fake workers in one single-threaded loop (no GIL hand-offs in the timing)."""

    def __init__(self, service: ServiceConfig, workers: int) -> None:
        ctx = zmq.Context()
        self.front = ctx.socket(zmq.PUSH)
        self.front.connect(service.frontend)
        self.feedback = ctx.socket(zmq.PUSH)
        self.feedback.connect(service.feedback)
        self.sinks = []
        for endpoint in service.worker_endpoints():
            sock = ctx.socket(zmq.PULL)
            sock.bind(endpoint)
            self.sinks.append(sock)
        self.poller = zmq.Poller()
        for sock in self.sinks:
            self.poller.register(sock, zmq.POLLIN)
        self.sent: dict[str, float] = {}
        self.latency: list[float] = []
        self.received = 0
        self.last_recv = 0.0
        self.next_beat = 0.0

    def drain(self, timeout_ms: int = 0) -> None:
        now = time.monotonic()
        if now >= self.next_beat:
            for w in range(len(self.sinks)):
                self.feedback.send(encode(wm.Heartbeat(w, 0)))
            self.next_beat = now + 0.2
        for sock, _ in self.poller.poll(timeout_ms):
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                t = time.monotonic()
                msg = wm.decode_to_worker(frames[0])
                assert isinstance(msg, wm.Dispatch)
                self.latency.append(t - self.sent.pop(msg.rid))
                self.received, self.last_recv = self.received + 1, t
                self.feedback.send(encode(wm.Finished(self.sinks.index(sock), msg.rid, msg.client, 32)))

    def send(self, rid: str, header: bytes, payload: bytes) -> None:
        self.sent[rid] = time.monotonic()
        self.front.send_multipart([header, payload])


def submissions(cfg: BenchRouterConfig, n: int, rng: random.Random) -> list[tuple[str, bytes]]:
    """Encoded Submit headers, made before timing: tokenizing and packing are the frontend's work."""
    docs = [[rng.randrange(128_000) for _ in range(cfg.prompt_len - 64)] for _ in range(cfg.clients)]
    out = []
    for i in range(n):
        c = rng.randrange(cfg.clients)
        tokens = pack_tokens(docs[c] + [rng.randrange(128_000) for _ in range(64)])
        out.append((f"r{i}", encode(fm.Submit(f"r{i}", f"client{c}", tokens))))
    return out


def run(cfg: BenchRouterConfig) -> dict[str, float]:
    base = f"tcp://127.0.0.1:{cfg.port}"
    workers = ",".join(f"tcp://127.0.0.1:{cfg.port + 10 + w}" for w in range(cfg.workers))
    service = ServiceConfig(frontend=base, failures=f"tcp://127.0.0.1:{cfg.port + 1}",
                            feedback=f"tcp://127.0.0.1:{cfg.port + 2}", workers=workers,
                            heartbeat_timeout=30.0)
    routing = RouterConfig(cfg.policy, num_workers=cfg.workers)
    load = Load(service, cfg.workers)
    router = mp.get_context("spawn").Process(target=_router_process, args=(service, routing), daemon=True)
    router.start()
    rng = random.Random(0)
    work = submissions(cfg, cfg.requests + int(cfg.rate * cfg.seconds) + 1, rng)
    payload = bytes(8 * cfg.prompt_len)  # stands in for the pickled SGLang request
    try:
        load.send(*work[0], payload)
        deadline = time.monotonic() + 60
        while load.received < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("router did not answer within 60 s")
            load.drain(50)
        load.latency.clear()
        # Phase 1: sustained rate, keeping at most 2,000 requests in flight inside the router.
        t0, i = time.monotonic(), 0
        start_count = load.received
        while load.received - start_count < cfg.requests:
            while i < cfg.requests and i - (load.received - start_count) < 2000:
                load.send(*work[1 + i], payload)
                i += 1
            load.drain(1)
        rate = cfg.requests / (load.last_recv - t0)
        # Phase 2: added latency at a fixed offered rate.
        load.latency.clear()
        n = int(cfg.rate * cfg.seconds)
        t0 = time.monotonic()
        j = 0
        while j < n:  # send what is due, then sleep in poll until the next is due (no spinning)
            now = time.monotonic()
            while j < n and t0 + j / cfg.rate <= now:
                load.send(*work[1 + cfg.requests + j], payload)
                j += 1
            load.drain(max(1, int(1000 * (t0 + j / cfg.rate - time.monotonic()))))  # >= 1 ms: no spin
        while load.sent:
            load.drain(10)
        offered = n / (time.monotonic() - t0)
    finally:
        router.terminate()
        router.join(5)
    lat = sorted(load.latency)
    return {"router_dispatch_rate_rps": rate, "router_offered_rate_rps": offered,
            "router_added_latency_ms_p50": 1e3 * statistics.median(lat),
            "router_added_latency_ms_p99": 1e3 * lat[int(0.99 * (len(lat) - 1))]}


def main(args: argparse.Namespace) -> int:
    cfg = from_flags(BenchRouterConfig, args)
    figures = run(cfg)
    f = figures
    print(f"router ({cfg.policy}, {cfg.workers} workers, {cfg.clients} clients, "
          f"{cfg.prompt_len}-token prompts): sustained {f['router_dispatch_rate_rps']:.0f} req/s; "
          f"at {f['router_offered_rate_rps']:.0f} req/s offered, added latency "
          f"p50 {f['router_added_latency_ms_p50']:.3f} ms, p99 {f['router_added_latency_ms_p99']:.3f} ms")
    if cfg.json:
        with open(cfg.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("bench-router", help="router overhead through real ZMQ sockets",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(parser, BenchRouterConfig)
    parser.set_defaults(func=main)
