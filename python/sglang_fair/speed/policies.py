"""``sglang-fair speed-policies``: speed and memory of the policy core on this machine.

- D²LPM dispatch (longest match + counters + insert) of 4,096-token prompts at 8 and 64 workers,
  against a global tree already holding ``prefixes`` cached prompts (documents shared by many
  questions, as in long-context QA): median and p99 microseconds per request, prompts packed as the
  router receives them; and the tree's memory per cached token (tracemalloc).
- One DLPM admission step (exact LPM order) with 1,000 and 10,000 waiting requests from 64 clients.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field

from sglang_fair.admission import AdmissionConfig, make_admission_policy
from sglang_fair.admission.budgets import SlotBudget
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.core.global_tree import GlobalRadixTree, pack_tokens
from sglang_fair.routing import RouterConfig, make_routing_policy

VOCAB = 128_000


@dataclass(frozen=True)
class BenchCoreConfig:
    prefixes: int = field(default=100_000, metadata={"help": "cached prompts in the global tree"})
    prompt_len: int = field(default=4096, metadata={"help": "tokens per prompt"})
    questions_per_doc: int = field(default=100, metadata={"help": "prompts sharing one document"})
    question_len: int = field(default=96, metadata={"help": "unique tail of each prompt"})
    dispatches: int = field(default=2000, metadata={"help": "timed dispatches per worker count"})
    steps: int = field(default=50, metadata={"help": "timed DLPM steps per queue length"})
    seed: int = field(default=0, metadata={"help": "random seed"})
    json: str = field(default="", metadata={"help": "also write the figures to this JSON file"})


@dataclass
class Prompt:
    rid: int
    client: str
    tokens: bytes  # packed, as the router receives prompts


def _tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(n)]


def build_tree(
    cfg: BenchCoreConfig, workers: int, rng: random.Random
) -> tuple[GlobalRadixTree, list[list[int]]]:
    tree = GlobalRadixTree(max_tokens=1 << 40)
    docs = [_tokens(rng, cfg.prompt_len - cfg.question_len)
            for _ in range(max(1, cfg.prefixes // cfg.questions_per_doc))]
    for i in range(cfg.prefixes):
        doc = docs[i % len(docs)]
        tree.insert(doc + _tokens(rng, cfg.question_len), worker=(i % len(docs)) % workers)
    return tree, docs


def tree_memory(cfg: BenchCoreConfig) -> dict[str, float]:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    tree, docs = build_tree(cfg, 64, random.Random(cfg.seed))
    del docs
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {"global_tree_tokens": tree.tokens, "global_tree_nodes": tree.nodes,
            "global_tree_bytes_per_token": used / tree.tokens}


def dispatch_us(cfg: BenchCoreConfig, workers: int) -> tuple[float, float]:
    rng = random.Random(cfg.seed + workers)
    policy = make_routing_policy(RouterConfig("d2lpm", num_workers=workers, max_tree_tokens=1 << 40))
    policy.tree, docs = build_tree(cfg, workers, rng)
    prompts = [Prompt(i, f"client{i % 64}", pack_tokens(rng.choice(docs) + _tokens(rng, cfg.question_len)))
               for i in range(cfg.dispatches)]
    times = []
    gc.disable()
    try:
        for p in prompts:
            t0 = time.perf_counter_ns()
            w = policy.route(p)
            times.append((time.perf_counter_ns() - t0) / 1000)
            policy.on_finish(w, p.client, 64)
    finally:
        gc.enable()
    times.sort()
    return statistics.median(times), times[int(0.99 * (len(times) - 1))]


@dataclass
class Waiting:
    rid: int
    client: str
    input_len: int
    cached_len: int
    arrival: float


def dlpm_step_ms(cfg: BenchCoreConfig, waiting_len: int) -> float:
    rng = random.Random(cfg.seed)
    times = []
    for _ in range(cfg.steps):
        policy = make_admission_policy(AdmissionConfig("dlpm", quantum=4096))
        queue = [Waiting(i, f"client{rng.randrange(64)}", 4096, rng.randrange(4096), float(i))
                 for i in range(waiting_len)]
        for r in queue:
            policy.on_arrival(r)
        for c in {r.client for r in queue}:  # mid-run state: some clients are in deficit
            policy.deficits[c] = rng.uniform(-8192, 4096)  # type: ignore[attr-defined]
        t0 = time.perf_counter_ns()
        admitted = policy.select(queue, SlotBudget(32))
        times.append((time.perf_counter_ns() - t0) / 1e6)
        assert len(admitted) == 32
    return statistics.median(times)


def run(cfg: BenchCoreConfig) -> dict[str, float]:
    out: dict[str, float] = {}
    for workers in (8, 64):
        p50, p99 = dispatch_us(cfg, workers)
        out[f"d2lpm_dispatch_us_p50_w{workers}"], out[f"d2lpm_dispatch_us_p99_w{workers}"] = p50, p99
        print(f"D2LPM dispatch, {workers:>2} workers, {cfg.prefixes} cached prompts of "
              f"{cfg.prompt_len} tokens: p50 {p50:.1f} us, p99 {p99:.1f} us", flush=True)
    out["d2lpm_dispatch_us_p50"] = out["d2lpm_dispatch_us_p50_w64"]
    out["d2lpm_dispatch_us_p99"] = out["d2lpm_dispatch_us_p99_w64"]
    out.update(tree_memory(cfg))
    print(f"global tree: {out['global_tree_tokens']:.0f} tokens in {out['global_tree_nodes']:.0f} nodes, "
          f"{out['global_tree_bytes_per_token']:.1f} bytes per cached token", flush=True)
    for n, key in ((1_000, "dlpm_step_ms_1k"), (10_000, "dlpm_step_ms_10k")):
        out[key] = dlpm_step_ms(cfg, n)
        print(f"DLPM admission step, {n} waiting requests, 64 clients, exact LPM order: "
              f"{out[key]:.2f} ms (median of {cfg.steps})", flush=True)
    return out


def main(args: argparse.Namespace) -> int:
    cfg = from_flags(BenchCoreConfig, args)
    figures = run(cfg)
    targets = [("d2lpm_dispatch_us_p50", 50.0, "us"), ("global_tree_bytes_per_token", 64.0, "B"),
               ("dlpm_step_ms_1k", 2.0, "ms")]
    for key, target, unit in targets:
        verdict = "met" if figures[key] <= target else f"MISSED by {figures[key] / target:.2f}x"
        print(f"target {key} <= {target:g} {unit}: {verdict}")
    if cfg.json:
        with open(cfg.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("speed-policies", aliases=["bench-core"],  # bench-core: its earlier name
                                   help="speed and memory of the policy core",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(parser, BenchCoreConfig)
    parser.set_defaults(func=main)
