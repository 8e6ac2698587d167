"""``sglang-fair serve --dp-size 2`` with no policy flag: the global router runs ``fair_cache_aware`` and the
workers ``dlpm_light``, over real HTTP and ZMQ on SGLang's CPU engine.

The data-parallel scenario of :mod:`sglang_fair.harness.dp_scenario` (one client's shared-prefix programs,
two light clients) runs for a short window; every request is answered, the heavy programs are served from
the prefix cache on both workers, and the router's and the schedulers' views name the default policies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sglang_fair.harness.dp_scenario import DPWorkload, run_dp_scenario
from sglang_fair.harness.server import free_port, get_json, running_server

pytestmark = pytest.mark.e2e

WINDOW_S = 10.0
SERVER = ("--max-running-requests", "8", "--max-total-tokens", "4500")  # as test_router_e2e.py


@pytest.fixture(scope="module")
def served(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    router_port = free_port()
    log = tmp_path_factory.mktemp("default-router") / "server.log"
    with running_server(tiny_model, (*SERVER, "--router-http-port", str(router_port)), log, dp_size=2) as url:
        summary = run_dp_scenario(url, DPWorkload(), WINDOW_S)
        print("\ndefault pair", json.dumps(summary.row()))
        return {"summary": summary, "state": get_json(f"http://127.0.0.1:{router_port}/state"),
                "fairness": get_json(url + "/fairness"), "main_port": get_json(url + "/fairness/router"),
                "log": log.read_text(errors="replace")}


def test_no_policy_flag_runs_the_fair_router_and_dlpm_light(served: dict[str, Any]) -> None:
    assert served["state"]["policy"] == "fair_cache_aware", served["state"]
    assert served["fairness"]["policy"] == "dlpm_light" and served["fairness"]["schedulers"] == 2


def test_the_router_is_seen_on_the_main_port_and_serve_bound_the_cpu_ranks(served: dict[str, Any]) -> None:
    """``GET /fairness/router`` needs no ``--router-http-port``; the harness no longer sets
    ``SGLANG_CPU_OMP_THREADS_BIND`` for ``serve``, which picks one core range per worker itself."""
    main = served["main_port"]
    assert main["policy"] == "fair_cache_aware" and len(main["workers"]) == 2, main
    assert main["counts"]["dispatched"] > 0, main
    assert "sglang-fair: SGLANG_CPU_OMP_THREADS_BIND=" in served["log"]


def test_the_default_pair_serves_everyone_from_the_cache(served: dict[str, Any]) -> None:
    """The heavy client keeps 32 requests over five programs in flight, four times what the two workers run:
    its load needs both, so a program may be held by both (locality measured 0.60-0.76, not the 0.9 of a
    router that pins programs) and what counts is that the prompts are served from the cache: 0.87-0.88 of
    every worker's prompt tokens measured (at most ~0.97: the light clients' prompts are new)."""
    summary = served["summary"]
    assert all(summary.done[c] > 0 for c in ("heavy", "light-1", "light-2")), summary.row()
    assert sorted(summary.hit_rate_per_worker) == [0, 1], summary.row()  # both workers served
    assert min(summary.hit_rate_per_worker.values()) >= 0.75, summary.row()
    counts = served["state"]["counts"]
    assert counts["dispatched"] > 0 and counts["failed"] == counts["dropped"] == 0, counts
