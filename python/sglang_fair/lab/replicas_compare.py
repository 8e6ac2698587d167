"""One gateway, two gateway replicas sharing what they route, and two that do not, over two CPU servers.

    sglang-fair lab replicas-compare --model DIR [--window 40] [--modes one,shared,apart] [--inflight 24]
        [--json results/compare_replicas.json]

Two ``sglang-fair serve`` instances (one worker each, one OpenMP thread each, ``dlpm_light`` with its
default Q^u in time, client weights ``heavy-a=4,heavy-b=1``, trusting the gateways' token; until
2026-11-28 Q^u was 2,048 units here, the default then being 65,536). Per mode, fresh gateways
(``fair_cache_aware``, the same weights): ``one`` a single gateway; ``shared`` two linked by their
peer ports; ``apart`` two without. The load goes to the gateways in turn, request by request (a
round-robin load balancer). Two heavy clients of weights 4 and 1 keep ``--inflight`` (24) ``/generate``
requests each in flight over their own three 600-word shared prefixes, a light client sends one unique
120-word prompt at a time. Twelve a server is more than its 8 running slots, but not always enough to keep
a client waiting there: each request spends its round trip outside the server. So the run samples each
server's ``/fairness`` every quarter second and reports, per heavy client, the share of samples in which
it had a request waiting there (``backlogged``): the weights' ratio is owed only where both were.
Both servers' prefix caches are flushed between modes. Per mode: prefix-cache hit rate (the servers'
``/fairness`` totals), each client's service (w_e x uncached prompt tokens + w_q x output tokens) per
second, the heavy pair's weighted ratio (service of the weight-4 client over the weight-1 one; 4 is the
weights'), Jain's index of service over weight, the light client's P50/P99 latency, and the sharing
traffic (bytes the gateways published). Needs SGLang
(scripts/install_sglang_cpu.sh) and the gateway extra.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from sglang_fair.core.cost import CostModel
from sglang_fair.harness.closed_loop import ClientSpec, run_load
from sglang_fair.harness.gateway import running_gateway
from sglang_fair.harness.server import free_port, get_json
from sglang_fair.harness.traffic import words
from sglang_fair.lab.gateway_compare import (
    cache_totals,
    compare_on_two_servers,
    comparison_parser,
    drain_and_flush,
)
from sglang_fair.metrics.stats import jain_index, percentile

WEIGHTS = "heavy-a=4,heavy-b=1"
SERVER_ARGS = ("--max-running-requests", "8", "--max-total-tokens", "6000", "--client-weights", WEIGHTS)
MODES = {"one": 1, "shared": 2, "apart": 2}
HEAVY = ("heavy-a", "heavy-b")
SAMPLE_S = 0.25


def specs(inflight: int = 24) -> list[ClientSpec]:
    def heavy(seed: int) -> Any:
        prefixes = [words(seed + p, 600) for p in range(3)]
        return lambda i: f"{prefixes[i % 3]} {words(seed + 50_000 + i, 10)}"

    return [ClientSpec("heavy-a", inflight, heavy(100), 16), ClientSpec("heavy-b", inflight, heavy(200), 16),
            ClientSpec("light", 1, lambda i: words(90_000 + i, 120), 16)]


def gateway_args(mode: str, index: int, ports: list[int], tmp: Path) -> tuple[str, ...]:
    args = ("--gateway-token-file", str(tmp / "token"), "--client-weights", WEIGHTS)
    if mode != "shared":
        return args
    peers = ",".join(f"127.0.0.1:{p}" for k, p in enumerate(ports) if k != index)
    return (*args, "--peer-port", str(ports[index]), "--peer-addresses", peers)


class Backlog:
    """While entered, samples every :data:`SAMPLE_S` seconds whether each heavy client has a request
    waiting at each server. A sample that fails, or a run with no sample, fails the run on exit."""

    def __init__(self, servers: list[str]) -> None:
        self.servers, self.stop = servers, threading.Event()
        self.samples = 0
        self.waiting = {(c, k): 0 for c in HEAVY for k in range(len(servers))}
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Backlog:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        if exc[0] is None and self.error is not None:
            raise RuntimeError("sampling the servers' /fairness failed") from self.error
        if exc[0] is None and not self.samples:
            raise RuntimeError("the load ended before the servers' /fairness was sampled once")

    def _run(self) -> None:
        try:
            while not self.stop.wait(SAMPLE_S):
                views = [get_json(s + "/fairness")["clients"] for s in self.servers]
                self.samples += 1
                for (client, k) in self.waiting:
                    self.waiting[client, k] += int((views[k].get(client) or {}).get("waiting") or 0) > 0
        except Exception as err:  # kept, and raised on exit in the caller's thread
            self.error = err

    def shares(self) -> dict[str, list[float]]:
        """Per heavy client, per server: the share of samples with a request of it waiting there."""
        return {c: [round(self.waiting[c, k] / self.samples, 2) for k in range(len(self.servers))]
                for c in HEAVY}


def run_mode(servers: list[str], mode: str, window: float, tmp: Path, inflight: int = 24) -> dict[str, Any]:
    drain_and_flush(servers)
    before = [cache_totals(s) for s in servers]
    ports = [free_port() for _ in range(MODES[mode])]
    with ExitStack() as stack:
        gateways = [stack.enter_context(running_gateway(servers, gateway_args(mode, k, ports, tmp),
                                                        tmp / f"gateway-{mode}-{k}.log"))
                    for k in range(MODES[mode])]
        with Backlog(servers) as backlog:
            results, end = run_load(gateways, specs(inflight), window)
        states = [get_json(g + "/gateway/state") for g in gateways]
    drain_and_flush(servers)
    after = [cache_totals(s) for s in servers]
    prompt = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    cached = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
    cost = CostModel()
    service = {name: sum(cost.extend_cost(o.prompt_tokens - o.cached_tokens)
                         + cost.output_cost(o.completion_tokens) for o in r.done()) / window
               for name, r in results.items()}
    weights = {"heavy-a": 4.0, "heavy-b": 1.0, "light": 1.0}
    light = results["light"].latencies(end)
    return {"mode": mode, "gateways": len(gateways), "window_s": window, "inflight": inflight,
            "backlogged": backlog.shares(),
            "hit_rate": round(cached / max(1, prompt), 3),
            "done": {name: len(r.done()) for name, r in results.items()},
            "service_per_s": {k: round(v, 1) for k, v in service.items()},
            "heavy_ratio": round(service["heavy-a"] / max(1e-9, service["heavy-b"]), 2),
            "jain_weighted": round(jain_index([service[c] / weights[c] for c in service]), 3),
            "light_p50_s": round(percentile(light, 50, nearest_rank=True), 2),
            "light_p99_s": round(percentile(light, 99, nearest_rank=True), 2),
            "routed": [sum(s["workers"][w]["routed"] for s in states) for w in range(len(servers))],
            "peer_bytes": sum((s.get("peers") or {}).get("sent_bytes", 0) for s in states),
            "observed_from_peers": [s.get("observed_from_peers", 0) for s in states]}


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'mode':8} {'hit rate':>8} {'a/b (4)':>8} {'jain w':>7} {'light p50':>9} {'light p99':>9} "
          f"{'done a/b/light':>15} {'routed':>10} {'peer KB':>8}  backlogged a; b (per server)")
    for r in rows:
        done = "/".join(str(r["done"][c]) for c in ("heavy-a", "heavy-b", "light"))
        routed = "/".join(map(str, r["routed"]))
        backlogged = "; ".join("/".join(map(str, r["backlogged"][c])) for c in HEAVY)
        print(f"{r['mode']:8} {r['hit_rate']:8.3f} {r['heavy_ratio']:8.2f} {r['jain_weighted']:7.3f} "
              f"{r['light_p50_s']:9.2f} {r['light_p99_s']:9.2f} {done:>15} {routed:>10} "
              f"{r['peer_bytes'] / 1024:8.1f}  {backlogged}")


def main() -> int:
    parser = comparison_parser(__doc__, "mode")
    parser.add_argument("--modes", default="one,shared,apart", help=f"of {', '.join(MODES)}, in order")
    parser.add_argument("--inflight", type=int, default=24, help="requests each heavy client keeps in flight")
    args = parser.parse_args()
    if args.inflight < 1:
        parser.error(f"--inflight must be at least 1, got {args.inflight}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := sorted(set(modes) - set(MODES)):
        parser.error(f"unknown mode {unknown}; known: {', '.join(MODES)}")
    return compare_on_two_servers(parser, args, SERVER_ARGS, modes, partial(run_mode, inflight=args.inflight),
                                  print_table)


if __name__ == "__main__":
    raise SystemExit(main())
