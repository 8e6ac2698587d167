"""Benchmarks of the SGLang plugin on CPU; prints the figures (recorded in docs/benchmarks.md).

    python scripts/bench_sglang_plugin.py overhead [--steps 200]
        Scheduler overhead per step with 100 and 1,000 waiting requests, in one process, on the same
        queue: SGLang's own ``lpm`` (``SchedulePolicy.calc_priority``) against the plugin's ``dlpm``
        (the hooked ``calc_priority`` — radix match of every waiting request — plus the core's
        ``select``). The PrefillAdder's own work (``add_one_req`` on admitted requests) is common to
        both and left out: the budget admits 8 requests per step. The tree is SGLang's Python
        ``RadixCache.create_simulated()`` holding one 1,300-token prefix that half the requests share
        (the live server uses the Rust ``UnifiedRadixCache``, whose matching is faster).
    python scripts/bench_sglang_plugin.py throughput --model DIR [--window 20] [--rounds 2]
        Output tokens/s of the CPU server under lpm and dlpm, alternating, with well-behaved clients
        (4 clients, each 4 requests in flight over its own shared prefix).
    python scripts/bench_sglang_plugin.py scenario --model DIR [--window 25]
        The end-to-end scenario of tests/e2e (heavy shared-prefix flood, backlogged medium client,
        light client) under lpm, fcfs, dlpm (Q^u 256) and vtc: light latency, requests done, hit rate.
Needs SGLang (scripts/install_sglang_cpu.sh).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from array import array
from pathlib import Path
from typing import Any

os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
PREFIX = list(range(1000, 2300))


class SlotBudget:
    def __init__(self, slots: int) -> None:
        self.slots = slots

    def try_add(self, req: Any) -> bool:
        self.slots -= 1
        return self.slots >= 0

    def exhausted(self) -> bool:
        return self.slots <= 0


def make_req(i: int) -> Any:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.sampling.sampling_params import SamplingParams

    ids = PREFIX + [i % 100] if i % 2 else list(range(5000 + 7 * i, 5180 + 7 * i))
    return Req(f"r{i}", "", array("q", ids), SamplingParams(max_new_tokens=32), routing_key=f"c{i % 4}")


def make_tree() -> Any:
    import torch
    from sglang.srt.mem_cache.base_prefix_cache import InsertParams
    from sglang.srt.mem_cache.radix_cache import RadixCache, RadixKey

    tree = RadixCache.create_simulated()
    key = RadixKey(token_ids=array("q", PREFIX))
    tree.insert(InsertParams(key=key, value=torch.zeros(len(PREFIX), dtype=torch.int64)))
    return tree


def step_times(policy_name: str, n_waiting: int, steps: int) -> tuple[list[float], list[float]]:
    """Seconds per scheduler step (calc_priority [+ select]) with ``n_waiting`` waiting requests,
    and the part of it spent in the core's ``select``."""
    from sglang.srt.managers.schedule_policy import SchedulePolicy

    from sglang_fair.sglang_plugin.scheduler_hooks import state_of

    policy = SchedulePolicy(policy_name, make_tree(), False, False, False)
    state = state_of(policy)
    queue = [make_req(i) for i in range(n_waiting)]
    next_id, times, select_times = n_waiting, [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        policy.calc_priority(queue)
        t1 = time.perf_counter()
        admitted = state.select(queue, SlotBudget(8)) if state is not None else queue[:8]
        t2 = time.perf_counter()
        times.append(t2 - t0)
        select_times.append(t2 - t1)
        gone = set(map(id, admitted))
        queue = [r for r in queue if id(r) not in gone]
        for req in admitted:  # they run and finish: outputs charged, then replaced by new arrivals
            req.output_ids.extend([1] * 32)
            req.finished = lambda: True
        if state is not None:
            state.after_step()
        queue += [make_req(next_id + k) for k in range(len(admitted))]
        next_id += len(admitted)
        if state is not None:
            for req in queue[-len(admitted):]:
                state.arrive(req)
    return times, select_times


def overhead(steps: int) -> None:
    from sglang.srt.plugins import load_plugins

    os.environ.setdefault("SGLANG_PLUGINS", "sglang_fair")
    load_plugins()
    from sglang.srt.runtime_context import SpawnRanks, publish
    from sglang.srt.server_args import ServerArgs

    # SGLang's runtime config, as its own tests publish it (sglang.test.test_utils.published_topology)
    ranks = SpawnRanks(world_rank=0, dp_rank=None)
    publish(ServerArgs(model_path="dummy", device="cpu"), role="test", ranks=ranks)
    print(f"{'waiting':>8} {'policy':>6} {'median ms':>10} {'p90 ms':>8} {'of which select, median ms':>27}")
    for n in (100, 1000):
        for name in ("lpm", "dlpm", "vtc"):
            all_times, select_times = step_times(name, n, steps)
            times = sorted(all_times[5:])
            med, p90 = statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3
            sel = statistics.median(select_times[5:]) * 1e3 if name != "lpm" else 0.0
            print(f"{n:>8} {name:>6} {med:>10.3f} {p90:>8.3f} {sel:>27.3f}")


def throughput(model: Path, window: float, rounds: int) -> None:
    from sglang_fair.harness.loadgen import ClientSpec, run_load
    from sglang_fair.harness.scenario import words
    from sglang_fair.harness.server import running_server

    def client(c: int) -> ClientSpec:
        prefix = words(100 + c, 600)
        return ClientSpec(f"c{c}", 4, lambda i: f"{prefix} {words(1000 * c + i, 12)}", 32)

    args = ("--max-running-requests", "8", "--max-total-tokens", "60000")
    rates: dict[str, list[float]] = {"lpm": [], "dlpm": []}
    for r in range(rounds):
        for name in ("lpm", "dlpm"):
            log = Path(f"/tmp/bench-{name}-{r}.log")
            with running_server(model, ("--schedule-policy", name, *args), log) as url:
                results, _ = run_load(url, [client(c) for c in range(4)], window)
            tokens = sum(o.completion_tokens for res in results.values() for o in res.done())
            rates[name].append(tokens / window)
            print(f"round {r} {name:>5}: {tokens / window:7.1f} output tokens/s")
    for name, values in rates.items():
        mean = statistics.mean(values)
        print(f"{name:>5}: mean {mean:7.1f} tokens/s over {len(values)} windows of {window:.0f} s")


def scenario(model: Path, window: float) -> None:
    import json

    from sglang_fair.harness.scenario import Workload, run_scenario
    from sglang_fair.harness.server import running_server

    args = ("--max-running-requests", "8", "--max-total-tokens", "60000")
    for name, extra in (("lpm", ()), ("fcfs", ()), ("dlpm", ("--fair-quantum", "256")), ("vtc", ())):
        log = Path(f"/tmp/bench-{name}.log")
        with running_server(model, ("--schedule-policy", name, *args, *extra), log) as url:
            row = run_scenario(url, Workload(), window).row()
        print(f"{name:>5}: {json.dumps(row)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--steps", type=int, default=200)
    t = sub.add_parser("throughput")
    t.add_argument("--model", type=Path, required=True)
    t.add_argument("--window", type=float, default=20.0)
    t.add_argument("--rounds", type=int, default=2)
    s = sub.add_parser("scenario")
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--window", type=float, default=25.0)
    args = parser.parse_args()
    if args.what == "overhead":
        overhead(args.steps)
    elif args.what == "throughput":
        throughput(args.model, args.window, args.rounds)
    else:
        scenario(args.model, args.window)


if __name__ == "__main__":
    main()
