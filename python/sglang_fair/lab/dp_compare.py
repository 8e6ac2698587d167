"""The default fair pair against SGLang's own data-parallel methods on the CPU server (2 workers, tiny model).

    sglang-fair lab dp-compare --model DIR [--scenario programs|hot|weighted] [--window 30]
        [--configs default,sglang,sglang-rr,...] [--json out.json]

Each configuration gets a fresh 2-worker server and one scenario for ``--window`` seconds:

- ``programs`` (:mod:`sglang_fair.harness.dp_scenario`): one client keeps 32 requests over five shared
  prefixes in flight, two light clients send one short request at a time;
- ``hot``: the same with one prefix shared by all of the heavy client's requests (a system prompt, a
  popular document): the operating point where a router that keeps a prefix on its holder leaves the
  other worker idle;
- ``weighted``: two heavy clients of weights 4 and 1 (``--client-weights``), both backlogged; the row's
  ``ratio`` is their service ratio (vanilla SGLang and ``plugin-fcfs`` have no weights: their ratio shows
  what happens without).

Configurations:

- ``default``: ``sglang-fair serve --dp-size 2`` with no policy flag (``fair_cache_aware`` + ``dlpm_light``);
- ``sglang``: plain SGLang (``python -m sglang.launch_server``, no plugin) with its own defaults;
- ``sglang-rr``, ``sglang-sq``: plain SGLang with LPM and its ``round_robin`` or ``total_requests``
  (shortest queue) method;
- ``d2lpm``: this project's faithful D²LPM router with ``dlpm_light`` workers;
- ``cache-aware``: SGLang's cache-aware rule in this project's router with ``dlpm_light`` workers;
- ``rr-light``: SGLang's own round robin with ``dlpm_light`` workers (no router process);
- ``plugin-fcfs``: SGLang's own round robin and FCFS with the plugin loaded: what the plugin's hooks cost.
Prints one JSON row per configuration (recorded in docs/evidence/benchmarks.md). Needs SGLang
(scripts/install_sglang_cpu.sh) and scripts/make_tiny_model.py's model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from sglang_fair.harness.dp_scenario import DPWorkload, WeightedWorkload, run_dp_scenario, run_weighted
from sglang_fair.harness.server import free_port, get_json, running_server

SERVER_ARGS = ("--max-running-requests", "8", "--max-total-tokens", "4500")
PLAIN, OURS = "sglang.launch_server", "sglang_fair.launch_server"
CONFIGS: dict[str, tuple[str, tuple[str, ...]]] = {  # name: (module, flags)
    "default": (OURS, ()),
    "sglang": (PLAIN, ()),
    "sglang-rr": (PLAIN, ("--load-balance-method", "round_robin", "--schedule-policy", "lpm")),
    "sglang-sq": (PLAIN, ("--load-balance-method", "total_requests", "--schedule-policy", "lpm")),
    "d2lpm": (OURS, ("--load-balance-method", "d2lpm", "--schedule-policy", "dlpm_light")),
    "cache-aware": (OURS, ("--load-balance-method", "cache_aware", "--schedule-policy", "dlpm_light")),
    "rr-light": (OURS, ("--load-balance-method", "round_robin", "--schedule-policy", "dlpm_light")),
    "plugin-fcfs": (OURS, ("--load-balance-method", "round_robin", "--schedule-policy", "fcfs")),
}
SCENARIOS = ("programs", "hot", "weighted")


def run_config(model: Path, name: str, scenario: str, window: float, log: Path) -> dict[str, Any]:
    module, flags = CONFIGS[name]
    port = free_port() if module == OURS else 0
    weighted = WeightedWorkload()
    fair = module == OURS and "fcfs" not in flags  # weights need a fair schedule policy
    extra = ("--client-weights", weighted.flag()) if scenario == "weighted" and fair else ()
    args = (*flags, *SERVER_ARGS, *extra, *(("--router-http-port", str(port)) if port else ()))
    with running_server(model, args, log, dp_size=2, module=module) as url:
        if scenario == "weighted":
            row = run_weighted(url, weighted, window)
        else:
            row = run_dp_scenario(url, DPWorkload(programs=1 if scenario == "hot" else 5), window).row()
        state = get_json(f"http://127.0.0.1:{port}/state") if port else {}
    return {"config": name, "scenario": scenario, "flags": " ".join((*flags, *extra)), **row,
            "router": state.get("policy"), "router_counts": state.get("counts"),
            "capacity": [w.get("capacity") for w in state.get("workers", [])] or None,
            "knee": [(w.get("load") or {}).get("knee") for w in state.get("workers", [])] or None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--scenario", default="programs", choices=SCENARIOS)
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"some of {', '.join(CONFIGS)}")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    if unknown := sorted(set(names) - set(CONFIGS)):
        parser.error(f"unknown config(s) {unknown}; choose from {', '.join(CONFIGS)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            rows.append(run_config(args.model, name, args.scenario, args.window, Path(tmp) / f"{name}.log"))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
