"""The defaults protect a light client (issue 16): ``--schedule-policy dlpm_light`` with no other flag
against SGLang's FCFS, on the real server, under a flood.

One client keeps 32 requests over a shared 1,300-token prefix in flight; two light clients send one
short unique request at a time (``sglang_fair.harness.scenario``, as ``scripts/
bench_sglang_plugin.py flood``). Under FCFS a light request waits behind the flood's queued requests;
under SGLang's LPM it starves (tests/e2e/test_fair_dlpm_e2e.py); dlpm_light at its default quantum
serves it next, without costing the flood its cache hits. Measured on the shared 2-core machine
(three runs): light P99 1.3-1.8 s under dlpm_light, 3.3-4.2 s under FCFS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fair_e2e_support import run_policy

from sglang_fair.harness.scenario import Summary, Workload

pytestmark = pytest.mark.e2e

FLOOD = Workload(heavy_concurrency=32, medium_concurrency=0, light_clients=2)
WINDOW_S = 10.0


@pytest.fixture(scope="module")
def runs(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Summary]:
    out = {}
    for policy in ("fcfs", "dlpm_light"):
        log = tmp_path_factory.mktemp(policy) / "server.log"
        out[policy] = run_policy(tiny_model, log, policy, window=WINDOW_S, workload=FLOOD)
        print(f"\n{policy}", json.dumps(out[policy].row()))
    return out


def light_done(summary: Summary) -> int:
    return sum(n for client, n in summary.done.items() if client.startswith("light"))


def test_default_dlpm_light_serves_light_clients_sooner_and_more_than_fcfs(runs: dict[str, Summary]) -> None:
    fcfs, fair = runs["fcfs"], runs["dlpm_light"]
    assert light_done(fair) >= 4, fair.row()
    assert fair.light_p99 <= 0.8 * fcfs.light_p99, (fair.row(), fcfs.row())
    assert light_done(fair) >= light_done(fcfs), (fair.row(), fcfs.row())


def test_default_dlpm_light_keeps_the_floods_cache_hits(runs: dict[str, Summary]) -> None:
    """Loose on purpose: in a 10 s window the first batch's misses of the prefix weigh a few percent
    (measured 0.926 against FCFS's 0.948 on one run, 0.936 against 0.904 on another); a policy that
    lost the prefix would fall far below."""
    fcfs, fair = runs["fcfs"], runs["dlpm_light"]
    assert fair.client_hit_rate["heavy"] >= 0.85 * fcfs.client_hit_rate["heavy"], (fair.row(), fcfs.row())
