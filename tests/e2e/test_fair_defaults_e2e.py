"""The defaults protect a light client (issue 16): ``--schedule-policy dlpm_light`` with no other flag
against SGLang's FCFS, on the real server, under a flood.

One client keeps 32 requests over a shared 1,300-token prefix in flight; two light clients send one
short unique request at a time (``sglang_fair.sglang_plugin.scenario``, as in ``scripts/
bench_sglang_plugin.py flood``). FCFS serves a light request after the flood's requests queued before
it; SGLang's LPM starves it (tests/e2e/test_fair_dlpm_e2e.py); dlpm_light at its default quantum
serves it next, without costing the flooding client its cache hits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fair_e2e_support import run_policy

from sglang_fair.sglang_plugin.scenario import Summary, Workload

pytestmark = pytest.mark.e2e

FLOOD = Workload(heavy_concurrency=32, medium_concurrency=0, light_clients=2)
WINDOW_S = 12.0


@pytest.fixture(scope="module")
def runs(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Summary]:
    out = {}
    for policy in ("fcfs", "dlpm_light"):
        log = tmp_path_factory.mktemp(policy) / "server.log"
        out[policy] = run_policy(tiny_model, log, policy, window=WINDOW_S, workload=FLOOD)
        print(f"\n{policy}", json.dumps(out[policy].row()))
    return out


def test_default_dlpm_light_serves_light_clients_sooner_and_more_than_fcfs(runs: dict[str, Summary]) -> None:
    fcfs, fair = runs["fcfs"], runs["dlpm_light"]
    light = sum(n for c, n in fair.done.items() if c.startswith("light"))
    assert light >= 4, fair.row()
    assert fair.light_p99 <= 0.8 * fcfs.light_p99, (fair.row(), fcfs.row())
    assert light >= sum(n for c, n in fcfs.done.items() if c.startswith("light")), (fair.row(), fcfs.row())


def test_default_dlpm_light_keeps_the_flooding_clients_cache_hits(runs: dict[str, Summary]) -> None:
    fcfs, fair = runs["fcfs"], runs["dlpm_light"]
    assert fair.client_hit_rate["heavy"] >= fcfs.client_hit_rate["heavy"] - 0.02, (fair.row(), fcfs.row())
