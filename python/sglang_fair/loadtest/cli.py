"""``sglang-fair bench``: run a ``sglang-fair sim`` workload against a real OpenAI-compatible server.

    sglang-fair bench --base-url http://127.0.0.1:30000 --workload tot --scenario s1 --clients 4 \\
        --duration 30 --json real.json --plot-dir plots/

Programs arrive at the simulator's seeded times and keep their dependencies; each call streams from
/v1/completions (or /v1/chat/completions with --api chat). The JSON has the keys of
``sglang-fair sim --json`` plus TTFT/TPOT/e2e percentiles, errors per client, the server's /fairness
(null where not served) and ``missing``: what the server did not report (e.g. ``cached_tokens``
unless SGLang runs with --enable-cache-report), whose figures are null, never guessed. Arrivals stop
at --duration; sent programs get --grace more seconds; Ctrl-C stops early and still writes the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sglang_fair.core.cost import CostModel
from sglang_fair.core.errors import ConfigError, require
from sglang_fair.core.flags import add_flags, from_flags
from sglang_fair.edge.keys import load_key_file
from sglang_fair.loadtest.config import LoadTestConfig
from sglang_fair.sim.report import add_output_flags
from sglang_fair.workloads import WorkloadConfig, call_count, make_workload

if TYPE_CHECKING:  # aiohttp (the bench extra) is imported only when the command runs
    from sglang_fair.loadtest.runner import Identity, LoadRun


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("bench", help="run a workload against a real OpenAI-compatible server",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(p, LoadTestConfig)
    add_flags(p, WorkloadConfig)
    add_flags(p, CostModel)  # --w-e, --w-q, --client-weights: as in sim and serve
    p.add_argument("--window", type=float, default=1.0, help="metrics window in seconds (default: 1)")
    p.add_argument("--name", default="real", help="run name in the table and plot file (default: real)")
    add_output_flags(p)
    p.set_defaults(func=main)


def make_identity(cfg: LoadTestConfig, clients: list[str]) -> Identity:
    """client -> (headers, OpenAI user) for ``cfg.identity``."""
    if cfg.identity == "key":
        table = load_key_file(cfg.keys_file)
        keys: dict[str, str] = {}
        for key, client in table.clients.items():
            keys.setdefault(client, key)
        absent = [c for c in clients if c not in keys]
        require(not absent, f"--keys-file {cfg.keys_file} has no key for client(s) {', '.join(absent)}")
        return lambda c: ({"Authorization": f"Bearer {keys[c]}"}, None)
    if cfg.identity == "user":
        return lambda c: ({}, c)
    return lambda c: ({cfg.client_header: c}, None)


async def _get_json(url: str, headers: dict[str, str] | None = None) -> Any:
    """GET ``url`` as JSON; None on any error or non-200 answer."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s, \
                s.get(url, headers=headers or {}) as resp:
            return await resp.json(content_type=None) if resp.status == 200 else None
    except (TimeoutError, aiohttp.ClientError, ValueError):
        return None


async def discover_model(root: str, headers: dict[str, str]) -> str:
    """The first model id of ``/v1/models``; ConfigError if the server cannot be reached."""
    doc = await _get_json(root + "/v1/models", headers)
    models = doc.get("data") if isinstance(doc, dict) else None
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise ConfigError(f"no model list at {root}/v1/models (is the server up?); pass --model")
    return str(models[0]["id"])


async def bench(cfg: LoadTestConfig, workload: WorkloadConfig, cost: CostModel, window: float,
                progress: bool) -> tuple[LoadRun, dict[str, Any] | None]:
    """Run the workload; Ctrl-C (SIGINT) ends it early with what was measured."""
    from sglang_fair.loadtest.runner import LoadRun, Target

    programs = make_workload(workload)
    identity = make_identity(cfg, workload.client_names())
    model = cfg.model or await discover_model(cfg.root, identity(workload.client_names()[0])[0])
    path = "/v1/chat/completions" if cfg.api == "chat" else "/v1/completions"
    target = Target(cfg.root + path, cfg.api, model, identity, cfg.ignore_eos, cfg.request_timeout,
                    cfg.max_connections, cfg.token_ids)
    run = LoadRun(programs, target, cost, workload.duration, cfg.grace, window)
    if progress:
        print(f"bench: {len(programs)} programs, {call_count(programs)} calls to {target.url} "
              f"(model {model!r}); arrivals for {workload.duration:g}s, then {cfg.grace:g}s grace",
              file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        await run.run(stop, progress)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    if stop.is_set() and progress:
        print("bench: interrupted; writing what was measured", file=sys.stderr, flush=True)
    fairness = await _get_json(cfg.root + "/fairness") if cfg.fairness else None
    return run, fairness if isinstance(fairness, dict) else None


def main(args: argparse.Namespace) -> int:
    from sglang_fair.loadtest.summary import run_summary
    from sglang_fair.sim.report import format_clients, format_table, plot_service, service_series

    cfg = from_flags(LoadTestConfig, args)
    workload = from_flags(WorkloadConfig, args)
    cost = from_flags(CostModel, args)
    require(args.window > 0, f"--window must be > 0, got {args.window}")
    run, fairness = asyncio.run(bench(cfg, workload, cost, args.window, args.progress))
    summary = run_summary(run, fairness, (cfg.slo_ttft, cfg.slo_tpot))
    print(format_table({args.name: summary}))
    print()
    print(format_clients(summary))
    slo = summary["slo"]
    print(f"\nSLO (TTFT {cfg.slo_ttft:g} s, TPOT {cfg.slo_tpot * 1000:g} ms): attainment "
          f"{slo['slo_attainment']}, goodput {slo['goodput']:.3f} calls/s; TTFT P50/P99 {slo['ttft_p50']}/"
          f"{slo['ttft_p99']} s, TPOT P50/P99 {slo['tpot_p50']}/{slo['tpot_p99']} s")
    if args.json:
        doc = dict(summary, service_series=service_series(run.result()),
                   config={"bench": asdict(cfg), "workload": asdict(workload),
                                    "w_e": cost.w_e, "w_q": cost.w_q, "model": run.target.model})
        try:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(doc, indent=2))
        except OSError as err:
            raise ConfigError(f"cannot write --json {args.json!r}: {err}") from None
    if args.plot_dir:
        kinds = ("perceived",) if summary["actual_service_rate"] is None else ("actual", "perceived")
        for path in plot_service({args.name: run.result()}, Path(args.plot_dir), kinds=kinds):
            print(f"wrote {path}")
    return 0
