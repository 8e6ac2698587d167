"""``sglang-fair demo``: the admission policies side by side on a built-in multi-tenant workload.

One worker, one heavy client that floods requests sharing a long prefix (a document with many
questions) and light clients that send short unique prompts at a steady pace: the situation of
Fig. 2 of 000. Time is in engine steps (one forward pass each); no GPU, no step-time model.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field

from sglang_fair.admission import ADMISSION_POLICIES, AdmissionConfig
from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import require
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.metrics.stats import percentile
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.backlog import BacklogRecorder
from sglang_fair.sim.lockstep import Lockstep, LockstepConfig
from sglang_fair.sim.request import EngineRequest


@dataclass(frozen=True)
class DemoConfig:
    policies: str = field(default="fcfs,lpm,vtc,dlpm", metadata={"help": "admission policies"})
    light_clients: int = field(default=3, metadata={"help": "number of light clients"})
    heavy_requests: int = field(default=300, metadata={"help": "requests the heavy client floods"})
    light_requests: int = field(default=30, metadata={"help": "requests per light client"})
    fair_quantum: float = field(default=400.0, metadata={"help": "Q^u of DLPM"})
    capacity: int = field(default=2400, metadata={"help": "KV pool tokens of the worker"})
    max_running: int = field(default=8, metadata={"help": "cap on running requests"})
    seed: int = field(default=0, metadata={"help": "random seed of the workload"})

    def __post_init__(self) -> None:
        for name in self.policy_names():
            ADMISSION_POLICIES.check(name)
        require(self.light_clients >= 1, "light_clients must be >= 1")
        require(self.heavy_requests >= 1 and self.light_requests >= 1, "request counts must be >= 1")

    def policy_names(self) -> list[str]:
        return [p.strip() for p in self.policies.split(",") if p.strip()]


def build_workload(cfg: DemoConfig) -> list[EngineRequest]:
    rng = random.Random(cfg.seed)
    documents = [[rng.randrange(50_000) for _ in range(800)] for _ in range(4)]
    out: list[EngineRequest] = []
    for _ in range(cfg.heavy_requests):  # all at once, documents interleaved: a shared-prefix backlog
        question = [rng.randrange(50_000) for _ in range(rng.randint(10, 40))]
        out.append(EngineRequest(len(out), "heavy", rng.choice(documents) + question, rng.randint(8, 32), 0))
    for c in range(cfg.light_clients):
        for i in range(cfg.light_requests):
            prompt = [rng.randrange(50_000) for _ in range(rng.randint(100, 300))]
            out.append(EngineRequest(len(out), f"light{c}", prompt, rng.randint(8, 32), i * 20 + c))
    for r in out:
        r.output_ids = [rng.randrange(50_000) for _ in range(r.output_len)]
    return out


def run_policy(cfg: DemoConfig, policy: str) -> dict[str, float]:
    cost = CostModel()
    cluster = Lockstep(LockstepConfig(capacity=cfg.capacity, max_running=cfg.max_running),
                      AdmissionConfig(policy, cfg.fair_quantum, cost), RouterConfig("round_robin"))
    requests = build_workload(cfg)
    recorder = BacklogRecorder(sorted({r.client for r in requests}), cost)
    cluster.run(requests, recorder)
    light = [r.finished - r.arrival + 1 for r in cluster.records.values() if r.client != "heavy"]
    led = cluster.ledger
    extend = sum(t.extend_tokens for t in led.tokens.values())
    return {
        "steps": cluster.step,
        "prefill_tokens": float(extend),
        "service_per_step": sum(led.total(c) for c in led.clients) / cluster.step,
        "cache_hit_rate": 1 - extend / sum(t.input_tokens for t in led.tokens.values()),
        "light_p50_steps": percentile(light, 50),
        "light_p99_steps": percentile(light, 99),
        "max_backlogged_diff": recorder.max_diff(),
    }


def render(results: dict[str, dict[str, float]]) -> str:
    cols = ["steps", "prefill_tokens", "service_per_step", "cache_hit_rate", "light_p50_steps",
            "light_p99_steps", "max_backlogged_diff"]
    widths = [max(len(c), 9) + 2 for c in cols]
    lines = [f"{'policy':<8}" + "".join(f"{c:>{w}}" for c, w in zip(cols, widths, strict=True))]
    for name, row in results.items():
        cells = [f"{row[c]:>{w}.3f}" if c == "cache_hit_rate" else f"{row[c]:>{w}.0f}"
                 for c, w in zip(cols, widths, strict=True)]
        lines.append(f"{name:<8}" + "".join(cells))
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    cfg = from_flags(DemoConfig, args)
    print(f"Built-in workload: 1 worker ({cfg.capacity} KV tokens, {cfg.max_running} running max); "
          f"'heavy' floods {cfg.heavy_requests} questions on 4 shared 800-token documents; "
          f"{cfg.light_clients} light clients send {cfg.light_requests} short unique prompts each.")
    results = {}
    for policy in cfg.policy_names():
        results[policy] = run_policy(cfg, policy)
        print(f"  ran {policy}", flush=True)
    print(render(results))
    print("prefill_tokens: input tokens computed (not served from the prefix cache); "
          "service_per_step: client-perceived service (input + 2 x output tokens) per engine step; "
          "light_p50/p99_steps: latency of the light clients' requests; max_backlogged_diff: largest "
          "service gap of two clients over an interval both were backlogged.")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("demo", help="compare admission policies on a built-in workload",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(parser, DemoConfig)
    parser.set_defaults(func=main)
