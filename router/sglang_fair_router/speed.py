"""``sglang-fair speed-router``: router overhead through its real ZMQ sockets.

Three processes: the router, exactly as served; ``workers`` fast fake workers in one process (each
dispatch is answered with a Finished at once, heartbeats flow); this process, the frontend.
Prompts are ``prompt_len`` tokens from ``clients`` clients, on shared documents so the global
tree is exercised. Measured: the sustained dispatch rate (send as fast as the router takes them,
at most 2,000 in flight), then at a fixed offered rate (requests evenly spaced) the added latency
end to end (frontend send -> worker receive; the send time rides in the payload) and the router's
own time per request (Submit received -> Dispatch sent, the router's ``submit_to_dispatch_us``).
``--pin router`` (default) runs the router process alone on the first CPU and the rest on the
others, so that the load does not preempt the router; the harness processes run without their
garbage collector. The CPU each process used during the fixed-rate phase is reported too, with what
other processes on the machine used meanwhile: figures taken while other jobs ran are not clean.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import random
import shutil
import tempfile
import threading
import time
from array import array
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

import zmq

from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy
from sglang_fair_router import frontend_msgs as fm
from sglang_fair_router.codec import encode
from sglang_fair_router.config import ServiceConfig
from sglang_fair_router.fake_worker import serve_pool
from sglang_fair_router.service import LatencyHistogram

PIN_CHOICES = ("none", "router", "router-main")


@dataclass(frozen=True)
class BenchRouterConfig:
    workers: int = field(default=8, metadata={"help": "fake workers"})
    clients: int = field(default=64, metadata={"help": "clients"})
    prompt_len: int = field(default=2048, metadata={"help": "tokens per prompt"})
    requests: int = field(default=20000, metadata={"help": "requests in the throughput phase"})
    rate: float = field(default=5000.0, metadata={"help": "offered rate of the latency phase (req/s)"})
    seconds: float = field(default=4.0, metadata={"help": "length of the latency phase"})
    policy: str = field(default="d2lpm", metadata={"help": "routing policy"})
    transport: str = field(default="ipc", metadata={
        "help": "ZMQ transport: ipc (Unix sockets, as the SGLang plugin runs the router) or tcp (loopback)",
        "choices": ("ipc", "tcp")})
    port: int = field(default=29700, metadata={"help": "first of the local TCP ports used (tcp)"})
    pin: str = field(default="router", metadata={
        "help": "CPU pinning: none; router (the router process, with its ZMQ I/O thread, alone on the "
                "first CPU, the rest elsewhere); router-main (only its main thread alone)",
        "choices": PIN_CHOICES})
    json: str = field(default="", metadata={"help": "also write the figures to this JSON file"})


def _router_process(service: ServiceConfig, routing: RouterConfig, control: Connection,
                    cpus: set[int] | None, io_cpus: set[int] | None) -> None:
    from sglang_fair_router.service import RouterService

    if cpus:
        os.sched_setaffinity(0, cpus)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    for cpu in io_cpus or ():
        ctx.set(zmq.THREAD_AFFINITY_CPU_ADD, cpu)  # before the first socket starts the I/O thread
    router = RouterService(service, make_routing_policy(routing))

    def answer() -> None:  # the histogram, on request (wakes only then)
        while True:
            control.recv()
            control.send((router.submit_latency.counts.tobytes(), router.submit_latency.max_ns))

    threading.Thread(target=answer, daemon=True).start()
    router.serve_forever(poll_ms=5)


def submissions(cfg: BenchRouterConfig, n: int, rng: random.Random) -> list[bytes]:
    """Encoded Submit headers, made before timing: tokenizing and packing are the frontend's work."""
    docs = [[rng.randrange(128_000) for _ in range(cfg.prompt_len - 64)] for _ in range(cfg.clients)]
    out = []
    for i in range(n):
        c = rng.randrange(cfg.clients)
        tokens = pack_tokens(docs[c] + [rng.randrange(128_000) for _ in range(64)])
        out.append(encode(fm.Submit(f"r{i}", f"client{c}", tokens)))
    return out


def _cpus(pin: str) -> tuple[set[int] | None, set[int] | None, set[int] | None]:
    """(router process, router I/O thread, harness) CPU sets; None: leave as is."""
    cpus = sorted(os.sched_getaffinity(0))
    if pin == "none" or len(cpus) < 2:
        return None, None, None
    first, rest = {cpus[0]}, set(cpus[1:])
    return first, (rest if pin == "router-main" else None), rest


def _cpu_ticks(pids: list[int]) -> list[int]:
    """[busy ticks of the whole machine, then the ticks each of ``pids`` used], from /proc (Linux)."""
    with open("/proc/stat") as fh:
        ticks = [int(x) for x in fh.readline().split()[1:9]]
    out = [sum(ticks) - ticks[3] - ticks[4]]
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        out.append(int(fields[11]) + int(fields[12]))  # utime, stime
    return out


def _percentiles(ns: list[int]) -> dict[str, float]:
    ns = sorted(ns)
    return {name: ns[min(len(ns) - 1, int(q * len(ns)))] / 1e6
            for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("max", 1.0))}


def _internal(control: Connection, since: array[int] | None = None) -> tuple[array[int], dict[str, float]]:
    control.send("stats")
    raw, max_ns = control.recv()
    hist = LatencyHistogram()
    hist.counts, hist.max_ns = array("q", raw), max_ns
    return hist.counts, hist.summary(since)


def run(cfg: BenchRouterConfig) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="sgl-fair-bench-")

    def ep(i: int) -> str:
        return f"ipc://{folder}/{i}" if cfg.transport == "ipc" else f"tcp://127.0.0.1:{cfg.port + i}"

    service = ServiceConfig(frontend=ep(0), failures=ep(1), feedback=ep(2), heartbeat_timeout=30.0,
                            workers=",".join(ep(10 + w) for w in range(cfg.workers)))
    router_cpus, io_cpus, rest = _cpus(cfg.pin)
    spawn = mp.get_context("spawn")
    received = spawn.RawValue("q", 0)
    router_ctl, router_end = spawn.Pipe()
    pool_ctl, pool_end = spawn.Pipe()
    routing = RouterConfig(cfg.policy, num_workers=cfg.workers)
    procs = [spawn.Process(target=serve_pool, args=(service.worker_endpoints(), service.feedback, received,
                                                     pool_end, rest), daemon=True),
             spawn.Process(target=_router_process, args=(service, routing, router_end, router_cpus, io_cpus),
                           daemon=True)]
    for p in procs:
        p.start()
    affinity = os.sched_getaffinity(0)
    if rest:
        os.sched_setaffinity(0, rest)
    n2 = int(cfg.rate * cfg.seconds)
    work = submissions(cfg, 1 + cfg.requests + n2, random.Random(0))
    filler = bytes(8 * cfg.prompt_len - 8)  # with the send time, stands in for the pickled SGLang request
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    front = ctx.socket(zmq.PUSH)
    front.connect(service.frontend)
    gc.collect()
    gc.freeze()
    gc.disable()

    def send(k: int) -> None:
        front.send_multipart([work[k], time.monotonic_ns().to_bytes(8, "little") + filler])

    def wait_for(count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while received.value < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"router: {received.value} of {count} dispatched within {timeout} s")
            time.sleep(0.001)

    try:
        send(0)
        wait_for(1, 60)
        # Phase 1: sustained rate, keeping at most 2,000 requests in flight.
        counts0, _ = _internal(router_ctl)
        t1, i = time.monotonic_ns(), 0
        while i < cfg.requests:
            if i - (received.value - 1) < 2000:
                send(1 + i)
                i += 1
            else:
                time.sleep(0.0002)
        wait_for(1 + cfg.requests, 60)
        counts1, internal1 = _internal(router_ctl, counts0)
        # Phase 2: a fixed offered rate, evenly spaced.
        pids = [p.pid or 0 for p in procs] + [os.getpid()]
        cpu0, t2, period = _cpu_ticks(pids), time.monotonic_ns(), 1e9 / cfg.rate
        for j in range(n2):
            wait = t2 + j * period - time.monotonic_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            send(1 + cfg.requests + j)
        offered = n2 / (time.monotonic_ns() - t2) * 1e9
        wait_for(1 + cfg.requests + n2, 60)
        _, internal2 = _internal(router_ctl, counts1)
        used = [(b - a) / os.sysconf("SC_CLK_TCK") / ((time.monotonic_ns() - t2) / 1e9)
                for a, b in zip(cpu0, _cpu_ticks(pids), strict=True)]
        pool_ctl.send("stop")
        sent_raw, recv_raw = pool_ctl.recv()
    finally:
        for p in procs:
            p.terminate()
            p.join(5)
        ctx.destroy(0)
        shutil.rmtree(folder, ignore_errors=True)
        os.sched_setaffinity(0, affinity)
        gc.enable()
    sent, recv = array("q", sent_raw), array("q", recv_raw)
    last1 = max(r for s, r in zip(sent, recv, strict=True) if t1 <= s < t2)
    e2e = _percentiles([r - s for s, r in zip(sent, recv, strict=True) if s >= t2])
    figures = {"router_dispatch_rate_rps": cfg.requests / (last1 - t1) * 1e9,
               "router_offered_rate_rps": offered}
    figures |= {"cpus_workers": used[1], "cpus_router": used[2], "cpus_frontend": used[3],
                "cpus_others": max(0.0, used[0] - sum(used[1:]))}
    figures |= {f"router_added_latency_ms_{k}": v for k, v in e2e.items()}
    figures |= {f"router_internal_us_{k}": v for k, v in internal2.items() if k != "count"}
    figures |= {f"router_internal_saturated_us_{k}": v for k, v in internal1.items() if k != "count"}
    return figures


def main(args: argparse.Namespace) -> int:
    cfg = from_flags(BenchRouterConfig, args)
    f = run(cfg)
    print(f"router ({cfg.policy}, {cfg.workers} workers, {cfg.clients} clients, {cfg.prompt_len}-token "
          f"prompts, pin {cfg.pin}): sustained {f['router_dispatch_rate_rps']:.0f} req/s "
          f"(inside the router p50 {f['router_internal_saturated_us_p50']:.0f} us, "
          f"p99 {f['router_internal_saturated_us_p99']:.0f} us)\n"
          f"at {f['router_offered_rate_rps']:.0f} req/s offered: added latency end to end "
          f"p50 {f['router_added_latency_ms_p50']:.3f} ms, p99 {f['router_added_latency_ms_p99']:.3f} ms, "
          f"p99.9 {f['router_added_latency_ms_p999']:.3f} ms; inside the router "
          f"p50 {f['router_internal_us_p50']:.0f} us, p99 {f['router_internal_us_p99']:.0f} us, "
          f"p99.9 {f['router_internal_us_p999']:.0f} us, max {f['router_internal_us_max']:.0f} us\n"
          f"CPUs busy then: router {f['cpus_router']:.2f}, fake workers {f['cpus_workers']:.2f}, "
          f"frontend {f['cpus_frontend']:.2f}, other processes {f['cpus_others']:.2f} (of {os.cpu_count()})")
    if cfg.json:
        with open(cfg.json, "w") as fh:
            json.dump(f, fh, indent=2)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("speed-router", aliases=["bench-router"],  # bench-router: its earlier name
                                   help="router overhead through real ZMQ sockets",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(parser, BenchRouterConfig)
    parser.set_defaults(func=main)
