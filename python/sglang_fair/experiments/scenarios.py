"""The sweeps' scenarios and per-run figures (docs/evidence/results.md, the light-client sections).

``flood``: a client floods 48 closed-loop streams of requests sharing a 2,048-token prefix, a
backlogged client keeps 8 unique 1,024-token requests in flight, two light clients send one short
unique request at a time (latency per request); 24 running requests at most; the cache holds the
working set (the CPU engine scenario of docs/evidence/results_details.md, scaled). ``flood-mem``: the same
with a
12,000-token KV pool, so the prefix competes with the rest for memory. ``qa-s1``, ``tot-s1``,
``judge-s1``: the papers' workloads, misbehaving client c0 ([1] Table 3), with a KV pool small
enough that switching clients costs prefix recomputation. ``weighted`` (a closed-loop workload of
the protocol, :data:`CLOSED_LOOP`): two heavy clients of weights 4 (c0) and 1 (c1) keep 16 chains a
worker in flight each, every call over the client's 1,024-token prefix, and a light client c2 sends one
short request a second (its latency: the well-behaved P99); dynamo#15187's test of weights across routers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.batching import BatchingConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.metrics import RunResult, percentile, summarize
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import WorkloadConfig, make_workload
from sglang_fair.workloads.program import Call, OutputOf, Program
from sglang_fair.workloads.tokens import random_tokens, seeded_rng

PAPER = {"qa-s1": ("qa", 30_000), "tot-s1": ("tot", 6_000), "judge-s1": ("judge", 8_000)}


def flood_programs(duration: float, seed: int = 0) -> list[Program]:
    """Flooder c0 (48 chains over one prefix), backlogged c1 (8 chains), light l1, l2 (open loop)."""
    rng = seeded_rng("flood", seed)
    prefix = random_tokens(rng, 2048)
    chain_len = int(duration * 4) + 8
    raw: list[tuple[str, float, tuple[Call, ...], bool]] = []
    for _ in range(48):
        calls = tuple(Call((prefix, random_tokens(rng, 24)), 64, (i - 1,) if i else ())
                      for i in range(chain_len))
        raw.append(("c0", 0.0, calls, True))
    for _ in range(8):
        calls = tuple(Call((random_tokens(rng, 1024),), 64, (i - 1,) if i else ())
                      for i in range(chain_len))
        raw.append(("c1", 0.0, calls, True))
    for client in ("l1", "l2"):
        calls = tuple(Call((random_tokens(rng, 160),), 32, (i - 1,) if i else ()) for i in range(chain_len))
        raw.append((client, 0.0, calls, False))
    raw.sort(key=lambda x: x[1])
    return [Program(pid, c, t, calls, seed, bad, "e2e", "flood")
            for pid, (c, t, calls, bad) in enumerate(raw)]


RAMP_S = 5.0  # weighted: the heavy chains start over this many seconds


def weighted_programs(dp: int, duration: float, seed: int = 0, max_running: int = 8) -> list[Program]:
    """Heavy c0 and c1 (2 x ``max_running`` chains a worker each, at least 16 and at most 96: both
    backlogged at any cap, the 24,000-token KV pool running about 50 at most; a call every time the
    last ends, the chains starting over the first :data:`RAMP_S` seconds as a load generator's threads
    do), light c2 (one single-call program a second); each heavy call is the client's 1,024-token prefix
    and the last call's output."""
    rng = seeded_rng("weighted", seed)
    chain_len = int(duration) + 8
    chains = min(max(16, 2 * max_running), 96)
    raw: list[tuple[str, float, tuple[Call, ...], bool]] = []
    for client in ("c0", "c1"):
        prefix = random_tokens(rng, 1024)
        for _ in range(chains * dp):
            first = Call((prefix, random_tokens(rng, 256)), 256)
            start = RAMP_S * rng.random()  # clients start as a load generator's threads do, not at once
            raw.append((client, start, (first, *(Call((prefix, OutputOf(i - 1)), 256, (i - 1,))
                                                 for i in range(1, chain_len))), True))
    for t in range(int(duration)):
        raw.append(("c2", t + rng.random(), (Call((random_tokens(rng, 192),), 32),), False))
    raw.sort(key=lambda x: x[1])
    return [Program(pid, c, t, calls, seed, bad) for pid, (c, t, calls, bad) in enumerate(raw)]


@dataclass(frozen=True)
class ClosedLoop:
    """A workload whose clients keep their work in flight (no arrival rate to set): its programs for
    ``dp`` workers running ``max_running`` requests at most, the engine it runs on, the cost model (the
    clients' weights)."""

    build: Callable[[int, float, int, int], list[Program]]
    engine: EngineConfig
    cost: CostModel = field(default_factory=CostModel)
    light: tuple[str, ...] | None = None  # clients whose request latency is the well-behaved P99

    def programs(self, dp: int, duration: float, seed: int, max_running: int = 0) -> list[Program]:
        return self.build(dp, duration, seed, max_running or self.engine.max_running)


def _flood(dp: int, duration: float, seed: int, max_running: int) -> list[Program]:
    return flood_programs(duration, seed)


CLOSED_LOOP = {
    "weighted": ClosedLoop(weighted_programs, EngineConfig(kv_tokens=24_000, max_running=8),
                           CostModel(client_weights={"c0": 4.0, "c1": 1.0, "c2": 1.0})),
    "flood": ClosedLoop(_flood, EngineConfig(max_running=24), light=("l1", "l2")),
}


def paper_workload(name: str, duration: float, **kw: Any) -> WorkloadConfig:
    """The workload of a paper scenario (``qa-s1``, ...): 4 clients, c0 misbehaving."""
    return WorkloadConfig(workload=PAPER[name][0], scenario="s1", clients=4, duration=duration, **kw)


def scenario(name: str, duration: float, dp: int = 1
             ) -> tuple[list[Program], EngineConfig, tuple[str, ...] | None]:
    """Programs (a paper workload's arrival rate scales with ``dp``), engine and light clients
    (None: the well-behaved ones)."""
    if name.startswith("flood"):
        kv = 12_000 if name == "flood-mem" else 0
        return flood_programs(duration), EngineConfig(kv_tokens=kv, max_running=24), ("l1", "l2")
    programs = make_workload(paper_workload(name, duration), dp)
    return programs, EngineConfig(kv_tokens=PAPER[name][1], max_running=256), None  # as published


def sweep_spec(engine: EngineConfig, pair: str, max_time: float, dp: int = 1, q_u: float = 0.0,
               q_w: float = RouterConfig.quantum, batching: str = "sglang", slo: bool = False) -> RunSpec:
    """A sweep's run of its own programs: ``pair`` (router:policy) on ``dp`` workers until ``max_time``."""
    router, policy = pair.split(":")
    return RunSpec(None, ClusterSimConfig(dp=dp, max_time=max_time), engine,
                   AdmissionConfig(policy=policy, quantum=q_u), RouterConfig(policy=router, quantum=q_w),
                   BatchingConfig(policy=batching), slo=slo)


def measure(res: RunResult, light: tuple[str, ...] | None) -> dict[str, Any]:
    """Light P99 (flood: the light clients' requests; paper workloads: the well-behaved clients'
    programs; unfinished ones count as waiting until the end of the run), the flooding client's
    (c0's) hit rate, throughput, Jain's index and the largest backlogged service gap."""
    s = summarize(res)
    c0 = [r for r in res.requests if r.client == "c0" and r.admitted >= 0]
    end = res.end_time
    if light is None:
        lat = [end - p.arrival if (x := p.latency()) is None else x
               for p in res.programs if not p.misbehaving]
    else:
        lat = [(r.finished if r.finished >= 0 else end) - r.arrival
               for r in res.requests if r.client in light]
    p99 = round(percentile(lat, 99), 4) if lat else None
    return {
        "light_p99_s": p99,
        "flooder_hit_rate": round(sum(r.cached_len for r in c0) / max(1, sum(r.input_len for r in c0)), 4),
        "throughput": s["throughput"],
        "jain_index": s["jain_index"],
        "max_backlogged_service_diff": s["max_backlogged_service_diff"],
    }
