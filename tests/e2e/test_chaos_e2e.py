"""The short versions of scripts/soak_cluster.py and scripts/chaos.py on the real cluster: two CPU servers
and two gateway replicas, keyed clients through both gateways (the long runs: docs/reliability.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

pytest.importorskip("psutil")

from sglang_fair.harness.chaos import (
    CLIENTS,
    DEADLINE_S,
    FAULTS,
    SERVER_ARGS,
    check_phase,
    run_fault,
    specs,
)
from sglang_fair.harness.cluster import Cluster, start_cluster
from sglang_fair.harness.soak import at_rate, capacity, soak
from sglang_fair.harness.traffic import Traffic

pytestmark = [pytest.mark.e2e, pytest.mark.timers]


@pytest.fixture(scope="module")
def cluster(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with ExitStack() as stack:
        yield start_cluster(stack, tiny_model, tmp_path_factory.mktemp("chaos"), CLIENTS, SERVER_ARGS)


def test_a_short_soak_at_most_of_the_capacity_fails_nothing_and_samples_every_process(
        cluster: Cluster) -> None:
    clients = specs(cluster.keys)
    top = capacity(cluster, clients, 10.0)
    rows = soak(cluster, at_rate(clients, 0.7 * top), 2, CLIENTS, minute=20.0)
    print("\ncapacity", round(top, 2), "requests/s;", json.dumps(rows))
    assert top > 0.5 and all(r["answered"] > 0 for r in rows), rows
    assert sum(r["failed"] for r in rows) == 0, [r["failures"] for r in rows]
    roles = set(rows[-1]["memory_mib"])
    assert {"server-a/scheduler", "server-b/scheduler", "gateway-1/main", "gateway-2/main"} <= roles, roles


def test_a_stopped_scheduler_fails_only_with_503_and_serving_recovers_then_each_request_is_charged_once(
        cluster: Cluster) -> None:
    """SIGSTOP of server A's scheduler for 10 s under traffic: no request hangs past its deadline, the
    only failures are 503s or cut streams naming why, completions are back within 30 s of SIGCONT; then,
    with no fault, the servers charge each client exactly what its answers say and nothing is left in
    flight at either gateway."""
    fault = dataclasses.replace(FAULTS["scheduler-stop"], hold=10.0)
    traffic = Traffic([g.url for g in cluster.gateways], specs(cluster.keys), DEADLINE_S).start()
    try:
        row = run_fault(cluster, traffic.snapshot, fault, baseline=8.0, watch=15.0)
    finally:
        traffic.stop()
    print("\n", json.dumps(row))
    assert set(row["outcomes"]) <= {"ok", "503", "cut"}, row
    assert row["in_flight_at_start"] > 0 and row["outcomes"].get("ok", 0) > 0, row
    assert row["recovered_after_s"] is not None, row  # back to 80% within the 15 s watched
    assert all("taken out" in f or "heartbeat" in f for f in row["failures"]), row["failures"]
    check = check_phase(cluster, 10.0)
    assert check["not_ok"] == 0 and check["requests"] > 0, check
    for client, c in check["charges"].items():
        assert [c[f"charged_{k}"] for k in ("requests", "input_tokens", "output_tokens")] \
            == [c[f"answered_{k}"] for k in ("requests", "input_tokens", "output_tokens")], (client, c)
    assert not any(check["left"]["servers"].values()), check["left"]
    assert not any(v for g in check["left"]["gateways"].values() for v in g.values()), check["left"]
