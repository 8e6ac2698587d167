"""Priority bands in the simulator: an interactive tenant's latency under a saturating batch tenant.

    sglang-fair lab bands [--duration 60] [--max-running 8,64] [--json out.json]

One simulated A100 + Llama-3.1-8B worker (the default engine) at each ``--max-running``. The interactive
tenant sends single requests (512-token prompt, 64 output tokens) at about a fifth of what the worker
serves of them; the batch tenant keeps 4 x max-running chains of long requests (2,048-token prompt,
256 output tokens) in flight, always more than the worker runs. Three runs per cap, ``dlpm_light``
throughout: the interactive tenant alone; beside the batch tenant in one band (the default: DLPM's
fairness alone); beside it with bands (interactive 0, batch 2). Printed per cap: the interactive P99
latency of each run over its P99 alone (the goal with bands: at most 1.25x), and the batch tenant's
throughput (tokens/s) with and without bands.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from sglang_fair.admission import AdmissionConfig
from sglang_fair.metrics import percentile
from sglang_fair.routing import RouterConfig
from sglang_fair.sim.config import ClusterSimConfig, EngineConfig
from sglang_fair.sim.simulator import Simulator
from sglang_fair.sim.spec import RunSpec
from sglang_fair.workloads import Program
from sglang_fair.workloads.program import Call, OutputOf
from sglang_fair.workloads.tokens import random_tokens, seeded_rng

BANDS = {"chat": 0.0, "etl": 2.0}


def programs(duration: float, max_running: int, rate: float, batch: bool, seed: int = 0) -> list[Program]:
    """The interactive tenant ``chat`` (Poisson, ``rate`` requests/s) and, with ``batch``, ``etl``."""
    rng = seeded_rng("bands", seed)
    raw: list[tuple[str, float, tuple[Call, ...]]] = []
    t = rng.expovariate(rate)
    while t < duration:
        raw.append(("chat", t, (Call((random_tokens(rng, 512),), 64),)))
        t += rng.expovariate(rate)
    if batch:
        prefix = random_tokens(rng, 1024)
        chain = int(duration) + 8
        for _ in range(4 * max_running):
            first = Call((prefix, random_tokens(rng, 1024)), 256)
            rest = (Call((prefix, OutputOf(i - 1), random_tokens(rng, 768)), 256, (i - 1,))
                    for i in range(1, chain))
            raw.append(("etl", rng.random(), (first, *rest)))
    raw.sort(key=lambda x: x[1])
    return [Program(pid, c, at, calls, seed) for pid, (c, at, calls) in enumerate(raw)]


def run_one(duration: float, max_running: int, rate: float, batch: bool, bands: bool) -> dict[str, Any]:
    spec = RunSpec(None, ClusterSimConfig(dp=1, max_time=duration), EngineConfig(max_running=max_running),
                   AdmissionConfig(policy="dlpm_light", client_bands=BANDS if bands else {}),
                   RouterConfig(policy="round_robin"))
    res = Simulator(spec, programs(duration, max_running, rate, batch)).run()
    end = res.end_time
    chat = [(r.finished if r.finished >= 0 else end) - r.arrival for r in res.requests if r.client == "chat"]
    etl_tokens = sum(r.output_len for r in res.requests if r.client == "etl" and r.finished >= 0)
    return {"chat_p99_s": percentile(chat, 99), "chat_done": sum(r.finished >= 0 for r in res.requests
                                                                 if r.client == "chat"),
            "etl_tokens_per_s": etl_tokens / duration}


def rate_for(max_running: int, step_s: float = 0.03) -> float:
    """About a fifth of the interactive requests one worker serves at this cap (64 decode steps of
    about ``step_s`` each per request, ``max_running`` at once)."""
    return 0.2 * max_running / (64 * step_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals (and of the run)")
    p.add_argument("--max-running", default="8,64", help="running requests per worker, comma-separated")
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args(argv)
    rows = []
    print(f"{'cap':>4} {'chat P99 alone s':>16} {'one band':>9} {'bands':>7} {'etl tok/s one band':>19} "
          f"{'etl tok/s bands':>16}")
    for cap in (int(x) for x in args.max_running.split(",")):
        t0, rate = time.perf_counter(), rate_for(cap)
        alone = run_one(args.duration, cap, rate, False, False)
        one = run_one(args.duration, cap, rate, True, False)
        banded = run_one(args.duration, cap, rate, True, True)
        row = {"max_running": cap, "chat_rate": rate, "alone": alone, "one_band": one, "bands": banded,
               "one_band_x": one["chat_p99_s"] / alone["chat_p99_s"],
               "bands_x": banded["chat_p99_s"] / alone["chat_p99_s"], "wall_s": time.perf_counter() - t0}
        rows.append(row)
        print(f"{cap:>4} {alone['chat_p99_s']:>16.2f} {row['one_band_x']:>8.2f}x {row['bands_x']:>6.2f}x "
              f"{one['etl_tokens_per_s']:>19.0f} {banded['etl_tokens_per_s']:>16.0f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0
