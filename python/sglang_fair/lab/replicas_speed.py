"""What sharing costs gateway replicas: bytes per dispatch, the time to apply a peer's notice, the link's
delay, and so the number of replicas the sharing holds up to.

    sglang-fair lab replicas-speed [--workers 16] [--requests 4000] [--prompt-tokens 200,2000]
        [--gateway-rps 1000] [--json results/speed_replicas.json]

For each prompt length: requests of one of 16 shared prefixes (90% of the prompt) plus unique tokens,
from 8 clients, routed by one ``fair_cache_aware`` policy over ``--workers`` workers (one in 4 finishes
as the next is routed); a second policy observes each dispatch (``RoutingPolicy.observe``), and a
third is fed the encoded notices through ``Replication.on_notice`` (decode, peer book, observe), all
in this process. Printed: the frame sizes, route and observe microseconds per request, and the
loopback PUB -> SUB delay (p50/p99) of Dispatched frames sent at 2,000/s over real ZMQ sockets.

Every replica applies every other's dispatches, so at a total rate of N requests/s each replica spends
N x (time to apply a notice) on its peers' work whatever the replica count: replicas add relay capacity
(the gateway's ceiling, ``--gateway-rps``, docs/evidence/gateway.md) but not tree capacity. The replica count
the sharing holds up to is where the peers' notices take half a core: R x G x t_apply = 0.5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio

from sglang_fair.core.global_tree import pack_tokens
from sglang_fair.gateway import peer_msgs as pm
from sglang_fair.gateway.peers import PeerConfig, PeerLink
from sglang_fair.gateway.replication import Replication
from sglang_fair.gateway.routing import GatewayRouter, RoutedPrompt
from sglang_fair.gateway.servers import ServerInfo, WorkerTable
from sglang_fair.harness.server import free_port
from sglang_fair.routing import RouterConfig, make_routing_policy


def prompts(count: int, length: int, seed: int = 0) -> list[tuple[str, list[int]]]:
    rnd = random.Random(seed)
    prefixes = [[rnd.randrange(32000) for _ in range(length * 9 // 10)] for _ in range(16)]
    tail = length // 10
    return [(f"c{rnd.randrange(8)}", rnd.choice(prefixes) + [rnd.randrange(32000) for _ in range(tail)])
            for _ in range(count)]


def time_policies(workers: int, reqs: list[tuple[str, list[int]]]) -> dict[str, float]:
    """Microseconds per request: route at one replica, observe at a second, on_notice at a third."""
    config = RouterConfig(policy="fair_cache_aware", num_workers=workers)
    table = WorkerTable([ServerInfo(f"http://s{i}:1", "m", 1) for i in range(workers)])
    origin, peer = make_routing_policy(config), make_routing_policy(config)
    link = PeerLink(PeerConfig(port=free_port()), "bench", "t", None, lambda _: b"")
    third = GatewayRouter(make_routing_policy(config), table, peers=link)
    replication = Replication(link, third)
    replication.on_notice(pm.Alive("peer", 0, "peer", "t"))
    packed = [RoutedPrompt(f"r{i}", c, pack_tokens(t)) for i, (c, t) in enumerate(reqs)]
    frames, sizes, spent = [], [], {"route": 0.0, "observe": 0.0, "notice": 0.0}
    for i, req in enumerate(packed):
        start = time.perf_counter()
        worker = origin.route(req)
        spent["route"] += time.perf_counter() - start
        start = time.perf_counter()
        peer.observe(req, worker)
        spent["observe"] += time.perf_counter() - start
        frame = pm.encode(pm.Dispatched("peer", i + 1, req.rid, req.client, worker, req.tokens))
        frames.append(frame)
        sizes.append(len(frame))
        if i % 4 == 3:
            origin.on_finish(worker, req.client, 16)
            peer.on_finish(worker, req.client, 16)
    start = time.perf_counter()
    for frame in frames:
        replication.on_notice(pm.decode_notice(frame))
    spent["notice"] = time.perf_counter() - start
    link.close()
    finished = len(pm.encode(pm.Finished("peer", 1, "r1", 16)))
    return {**{f"{k}_us": 1e6 * v / len(reqs) for k, v in spent.items()},
            "dispatched_bytes": statistics.mean(sizes), "finished_bytes": finished}


async def link_delay(frames: int = 2000, rate: float = 2000.0) -> dict[str, float]:
    """PUB -> SUB delay over loopback TCP (p50 and p99, ms) of Dispatched frames of 200 tokens."""
    context = zmq.asyncio.Context()
    pub, sub = context.socket(zmq.PUB), context.socket(zmq.SUB)
    port = free_port()
    pub.bind(f"tcp://127.0.0.1:{port}")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{port}")
    await asyncio.sleep(0.3)
    tokens = pack_tokens(list(range(200)))
    delays: list[float] = []

    async def receive() -> None:
        while len(delays) < frames:
            msg = pm.decode_notice(await sub.recv())
            assert isinstance(msg, pm.Dispatched)
            delays.append(time.perf_counter() - float(msg.rid))

    task = asyncio.create_task(receive())
    for i in range(frames):
        await pub.send(pm.encode(pm.Dispatched("r", i, repr(time.perf_counter()), "c", 0, tokens)))
        await asyncio.sleep(1 / rate)
    await asyncio.wait_for(task, 10)
    context.destroy(linger=0)
    cuts = statistics.quantiles(delays, n=100)
    return {"p50_ms": 1e3 * cuts[49], "p99_ms": 1e3 * cuts[98]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--prompt-tokens", default="200,2000")
    parser.add_argument("--gateway-rps", type=float, default=1000.0,
                        help="one gateway's relay ceiling, requests/s (docs/evidence/gateway.md: 366-1,306)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    out: dict[str, Any] = {"workers": args.workers, "gateway_rps": args.gateway_rps, "prompts": {}}
    print(f"{'prompt':>7} {'frame B':>8} {'route us':>9} {'observe us':>11} {'notice us':>10} {'R max':>6}")
    for length in (int(x) for x in args.prompt_tokens.split(",")):
        row = time_policies(args.workers, prompts(args.requests, length))
        row["replicas_max"] = 0.5 / (args.gateway_rps * row["notice_us"] * 1e-6)
        out["prompts"][length] = row
        print(f"{length:>7} {row['dispatched_bytes']:>8.0f} {row['route_us']:>9.1f} "
              f"{row['observe_us']:>11.1f} {row['notice_us']:>10.1f} {row['replicas_max']:>6.1f}")
    out["link"] = asyncio.run(link_delay())
    print(f"PUB -> SUB over loopback, 2,000 frames/s: p50 {out['link']['p50_ms']:.2f} ms, "
          f"p99 {out['link']['p99_ms']:.2f} ms; Finished frame {row['finished_bytes']} B")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
