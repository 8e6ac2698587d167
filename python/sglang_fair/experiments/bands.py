"""Priority bands in the simulator: an interactive tenant's latency under a saturating batch tenant.

    sglang-fair lab bands [--duration 60] [--max-running 8,64] [--json out.json]

One simulated A100 + Llama-3.1-8B worker (the default engine) at each ``--max-running``. The interactive
tenant sends single requests (512-token prompt, 64 output tokens) at about a fifth of what the worker
serves of them; the batch tenant keeps 4 x max-running chains of long requests (2,048-token prompt,
256 output tokens) in flight, always more than the worker runs. Five runs per cap, ``dlpm_light``
throughout: the interactive tenant alone; beside the batch tenant in one band (the default: DLPM's
fairness alone); beside it with bands (interactive 0, batch 2) without the band reserve
(``--fair-band-reserve-s 0``); with bands and the reserve (``--reserve-s``, the default's window) but
no prefill pace (``--fair-band-prefill-share 1``); with bands, the reserve and the pace (the defaults).
Printed per cap: the interactive P99 latency of each run over its P99 alone (the goal with bands: at
most 1.25x), and the batch tenant's throughput (tokens/s) in each run beside it.
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
KINDS = ("one_band", "bands", "reserve", "paced")
WARM_S = 10.0  # "warm": the interactive requests that arrive after this, once the batch flood has started


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


def run_one(duration: float, max_running: int, rate: float, batch: bool, bands: bool,
            reserve_s: float = 0.0, seed: int = 0, pace: bool = True) -> dict[str, Any]:
    """One run; ``reserve_s``: the bands' reserve window (``--fair-band-reserve-s``; 0: none);
    ``pace``: the prefill pace at its default share (else ``--fair-band-prefill-share 1``)."""
    admission = AdmissionConfig(policy="dlpm_light", client_bands=BANDS if bands else {},
                                band_reserve_s=reserve_s,
                                band_prefill_share=AdmissionConfig.band_prefill_share if pace else 1.0)
    spec = RunSpec(None, ClusterSimConfig(dp=1, max_time=duration), EngineConfig(max_running=max_running),
                   admission, RouterConfig(policy="round_robin"))
    res = Simulator(spec, programs(duration, max_running, rate, batch, seed)).run()
    end = res.end_time
    chat = [((r.finished if r.finished >= 0 else end) - r.arrival, r.arrival) for r in res.requests
            if r.client == "chat"]
    etl_tokens = sum(r.output_len for r in res.requests if r.client == "etl" and r.finished >= 0)
    return {"chat_p99_s": percentile([t for t, _ in chat], 99),
            "chat_p99_warm_s": percentile([t for t, at in chat if at >= WARM_S] or [0.0], 99),
            "chat_done": sum(r.finished >= 0 for r in res.requests if r.client == "chat"),
            "etl_tokens_per_s": etl_tokens / duration}


def rate_for(max_running: int, step_s: float = 0.03) -> float:
    """About a fifth of the interactive requests one worker serves at this cap (64 decode steps of
    about ``step_s`` each per request, ``max_running`` at once)."""
    return 0.2 * max_running / (64 * step_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals (and of the run)")
    p.add_argument("--max-running", default="8,64", help="running requests per worker, comma-separated")
    p.add_argument("--seeds", default="0", help="workload seeds, comma-separated (a row each)")
    p.add_argument("--reserve-s", type=float, default=AdmissionConfig.band_reserve_s,
                   help="the reserve's window in the fourth run (--fair-band-reserve-s)")
    p.add_argument("--json", type=Path, help="write the rows here")
    args = p.parse_args(argv)
    rows = []
    print(f"interactive P99 over alone (warm: arrivals after {WARM_S:.0f} s); batch tokens/s")
    print(f"{'cap':>4} {'seed':>4} {'P99 alone s':>11} {'one band':>9} {'bands':>6} {'reserve':>8} "
          f"{'warm':>5} {'paced':>6} {'warm':>5}   etl: {'one band':>8} {'bands':>6} {'reserve':>7} "
          f"{'paced':>5}")
    for cap in (int(x) for x in args.max_running.split(",")):
        for seed in (int(x) for x in args.seeds.split(",")):
            rows.append(row := measure(args.duration, cap, seed, args.reserve_s))
            etl = [row[k]["etl_tokens_per_s"] for k in KINDS]
            print(f"{cap:>4} {seed:>4} {row['alone']['chat_p99_s']:>11.2f} {row['one_band_x']:>8.2f}x "
                  f"{row['bands_x']:>5.2f}x {row['reserve_x']:>7.2f}x {row['reserve_warm_x']:>4.2f}x "
                  f"{row['paced_x']:>5.2f}x {row['paced_warm_x']:>4.2f}x   "
                  f"{'':>4} {etl[0]:>8.0f} {etl[1]:>6.0f} {etl[2]:>7.0f} {etl[3]:>5.0f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def measure(duration: float, cap: int, seed: int, reserve_s: float) -> dict[str, Any]:
    """The five runs at one cap and seed, and the interactive P99 of each over its P99 alone."""
    t0, rate = time.perf_counter(), rate_for(cap)
    runs = {"alone": run_one(duration, cap, rate, False, False, seed=seed),
            "one_band": run_one(duration, cap, rate, True, False, seed=seed),
            "bands": run_one(duration, cap, rate, True, True, seed=seed),
            "reserve": run_one(duration, cap, rate, True, True, reserve_s, seed, pace=False),
            "paced": run_one(duration, cap, rate, True, True, reserve_s, seed)}
    alone = runs["alone"]
    row: dict[str, Any] = {"max_running": cap, "seed": seed, "chat_rate": rate, "reserve_s": reserve_s,
                           "prefill_share": AdmissionConfig.band_prefill_share, **runs}
    for k in KINDS:
        row[f"{k}_x"] = runs[k]["chat_p99_s"] / alone["chat_p99_s"]
    for k in ("reserve", "paced"):
        row[f"{k}_warm_x"] = runs[k]["chat_p99_warm_s"] / max(alone["chat_p99_warm_s"], 1e-9)
    row["wall_s"] = time.perf_counter() - t0
    return row
