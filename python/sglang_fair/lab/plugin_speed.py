"""Benchmarks of the SGLang plugin on CPU; prints the figures (recorded in docs/evidence/benchmarks.md).

    sglang-fair lab plugin-speed overhead [--steps 200] [--sizes 100,1000,10000]
        Scheduler overhead per step with 100, 1,000 and 10,000 waiting requests, in one process, on
        the same queue: SGLang's own ``lpm`` and ``fcfs`` (``SchedulePolicy.calc_priority``) against
        the plugin's policies (the hooked ``calc_priority`` — radix matching of the waiting requests
        whose match can have changed — plus the core's ``select``), and ``dlpm`` matching every
        waiting request every step (the plugin before incremental matching). The PrefillAdder's own
        work (``add_one_req`` on admitted requests) is common to all and left out: the budget admits
        8 requests per step. The cache is the one the live server builds (``UnifiedRadixCache``,
        Rust tree core, 60,000 KV tokens) holding one 1,300-token prefix that half the requests
        share; admitted requests publish prompt + output into it (evicting when full).
    sglang-fair lab plugin-speed throughput --model DIR [--window 20] [--rounds 2]
        Output tokens/s of the CPU server under lpm and dlpm, alternating, with well-behaved clients
        (4 clients, each 4 requests in flight over its own shared prefix).
    sglang-fair lab plugin-speed scenario --model DIR [--window 25]
        The end-to-end scenario of tests/e2e (heavy shared-prefix flood, backlogged medium client,
        light client) under lpm, fcfs, dlpm (Q^u 256) and vtc: light latency, requests done, hit rate.
    sglang-fair lab plugin-speed flood --model DIR [--window 20] [--only fcfs,dlpm_light]
        The defaults under a flood: one client keeps 32 requests over a shared 1,300-token
        prefix in flight, two light clients send one short unique request at a time; lpm, fcfs, vtc,
        dlpm (default Q^u and 256) and dlpm_light (default Q^u): light P99, per-client hit rate, tokens/s.
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


class Tree:
    """SGLang's serving-path cache (UnifiedRadixCache, Rust tree core) holding PREFIX; finished
    requests publish their sequences into it, evicting least-recently-used nodes when full."""

    def __init__(self, kv_tokens: int = 60_000) -> None:
        from sglang_fair.sglang_plugin.match_index import unified_radix_cache

        self.cache, self.allocator = unified_radix_cache(kv_tokens)
        self.publish(PREFIX)

    def publish(self, tokens: list[int]) -> None:
        from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams
        from sglang.srt.mem_cache.radix_cache import RadixKey

        value = self.allocator.alloc(len(tokens))
        if value is None:
            self.cache.evict(EvictParams(num_tokens=len(tokens)))
            value = self.allocator.alloc(len(tokens))
        if value is not None:
            self.cache.insert(InsertParams(key=RadixKey(array("q", tokens)), value=value))


def step_times(policy_name: str, n_waiting: int, steps: int) -> tuple[list[float], list[float], int]:
    """Seconds per scheduler step (calc_priority [+ select]) with ``n_waiting`` waiting requests,
    the part of it spent in ``select``, and the radix matches the plugin made after the first step.
    Each step 8 requests are admitted, run (32 output tokens), publish prompt + output into the
    cache and are replaced by new arrivals, as in a busy server."""
    from sglang.srt.managers.schedule_policy import SchedulePolicy

    from sglang_fair.sglang_plugin.scheduler_hooks import state_of

    tree = Tree()
    policy = SchedulePolicy(policy_name, tree.cache, False, False, False)
    state = state_of(policy)
    queue = [make_req(i) for i in range(n_waiting)]
    next_id, times, select_times, matches = n_waiting, [], [], 0
    for step in range(steps):
        t0 = time.perf_counter()
        policy.calc_priority(queue)
        t1 = time.perf_counter()
        admitted = state.select(queue, SlotBudget(8)) if state is not None else queue[:8]
        t2 = time.perf_counter()
        times.append(t2 - t0)
        select_times.append(t2 - t1)
        if step == 0 and state is not None and state.index is not None:
            matches = -state.index.matches
        gone = set(map(id, admitted))
        queue = [r for r in queue if id(r) not in gone]
        for req in admitted:
            req.output_ids.extend([7] * 32)
            tree.publish(list(req.origin_input_ids) + list(req.output_ids))
            req.finished = lambda: True
        if state is not None:
            state.after_step()
        queue += [make_req(next_id + k) for k in range(len(admitted))]
        next_id += len(admitted)
        if state is not None:
            for req in queue[-len(admitted):]:
                state.arrive(req)
    if state is not None and state.index is not None:
        matches += state.index.matches
    return times, select_times, matches


def overhead(steps: int, sizes: list[int]) -> None:
    from sglang.srt.plugins import load_plugins

    os.environ.setdefault("SGLANG_PLUGINS", "sglang_fair")
    load_plugins()
    from sglang.srt.runtime_context import SpawnRanks, publish
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    from sglang_fair.sglang_plugin import match_index

    # SGLang's runtime config, as its own tests publish it (sglang.test.test_utils.published_topology)
    ranks = SpawnRanks(world_rank=0, dp_rank=None)
    args = ServerArgs(model_path="dummy", device="cpu")
    publish(args, role="test", ranks=ranks)
    set_global_server_args_for_scheduler(args)
    incremental = match_index.supported
    print(f"{'waiting':>8} {'policy':>22} {'median ms':>10} {'p90 ms':>8} {'select ms':>10} "
          f"{'matches/step':>13}")
    for n in sizes:
        for name, label in (("lpm", "sglang lpm"), ("fcfs", "sglang fcfs"), ("dlpm", "dlpm full re-match"),
                            ("dlpm", "dlpm"), ("dlpm_light", "dlpm_light"), ("vtc", "vtc")):
            match_index.supported = (lambda tree: False) if label.endswith("re-match") else incremental
            all_times, select_times, matches = step_times(name, n, steps)
            times = sorted(all_times[5:])
            med, p90 = statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3
            sel = statistics.median(select_times[5:]) * 1e3 if name not in ("lpm", "fcfs") else 0.0
            per_step = f"{matches / (steps - 1):.1f}" if name.startswith("dlpm") and matches else "-"
            if label.endswith("re-match"):
                per_step = str(n)
            print(f"{n:>8} {label:>22} {med:>10.3f} {p90:>8.3f} {sel:>10.3f} {per_step:>13}", flush=True)
    match_index.supported = incremental


def throughput(model: Path, window: float, rounds: int) -> None:
    from sglang_fair.harness.closed_loop import ClientSpec, run_load
    from sglang_fair.harness.server import running_server
    from sglang_fair.harness.traffic import words

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


FLOOD_POLICIES = (("lpm", ()), ("fcfs", ()), ("vtc", ()), ("dlpm", ()), ("dlpm", ("--fair-quantum", "256")),
                  ("dlpm_light", ()))


def flood(model: Path, window: float, only: str) -> None:
    """Defaults under a flood: light-client P99, the flooder's hit rate, throughput, per policy."""
    import json

    from sglang_fair.harness.scenario import Workload, run_scenario
    from sglang_fair.harness.server import running_server

    workload = Workload(heavy_concurrency=32, medium_concurrency=0, light_clients=2)
    args = ("--max-running-requests", "8", "--max-total-tokens", "60000")
    wanted = {x.strip() for x in only.split(",") if x.strip()}
    for name, extra in FLOOD_POLICIES:
        label = name + (f"@{extra[1]}" if extra else "")
        if wanted and label not in wanted:
            continue
        flags = ("--schedule-policy", name, *args, *extra)
        with running_server(model, flags, Path(f"/tmp/bench-{label}.log")) as url:
            row = run_scenario(url, workload, window).row()
        print(f"{label:>10}: {json.dumps(row)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--steps", type=int, default=200)
    o.add_argument("--sizes", default="100,1000,10000", help="waiting-queue lengths")
    t = sub.add_parser("throughput")
    t.add_argument("--model", type=Path, required=True)
    t.add_argument("--window", type=float, default=20.0)
    t.add_argument("--rounds", type=int, default=2)
    s = sub.add_parser("scenario")
    s.add_argument("--model", type=Path, required=True)
    s.add_argument("--window", type=float, default=25.0)
    f = sub.add_parser("flood")
    f.add_argument("--model", type=Path, required=True)
    f.add_argument("--window", type=float, default=20.0)
    f.add_argument("--only", default="", help="comma-separated labels, e.g. 'fcfs,dlpm_light'")
    args = parser.parse_args()
    if args.what == "overhead":
        overhead(args.steps, [int(x) for x in args.sizes.split(",")])
    elif args.what == "throughput":
        throughput(args.model, args.window, args.rounds)
    elif args.what == "flood":
        flood(args.model, args.window, args.only)
    else:
        scenario(args.model, args.window)


if __name__ == "__main__":
    main()
