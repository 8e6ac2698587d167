"""The short versions of ``sglang-fair lab cluster-soak`` and ``lab chaos`` on the real cluster: two CPU
servers and two gateway replicas behind HAProxy, keyed clients through it (the long runs:
docs/evidence/reliability.md)."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("psutil")

from sglang_fair.harness.chaos import CLIENTS, DEADLINE_S, FAULTS, check_phase, run_fault, specs
from sglang_fair.harness.cluster import Cluster
from sglang_fair.harness.soak import at_rate, capacity, soak
from sglang_fair.harness.traffic import Traffic

pytestmark = [pytest.mark.e2e, pytest.mark.timers]


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
    traffic = Traffic(cluster.balancer.url, specs(cluster.keys), DEADLINE_S).start()
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


def test_a_stopped_gateway_is_taken_out_by_haproxy_and_costs_only_the_requests_it_held(
        cluster: Cluster) -> None:
    """SIGSTOP of gateway-2 for 8 s under open-loop traffic (6 requests/s): HAProxy's health check takes
    it out within 5 s, every request sent after that is answered in time by the other gateway, and
    nothing fails (what the stopped gateway held finishes once it resumes)."""
    fault = dataclasses.replace(FAULTS["gateway-stop"], hold=8.0)
    traffic = Traffic(cluster.balancer.url, at_rate(specs(cluster.keys), 6.0), DEADLINE_S).start()
    try:
        row = run_fault(cluster, traffic.snapshot, fault, baseline=5.0, watch=8.0)
    finally:
        traffic.stop()
    print("\n", json.dumps(row))
    assert row["balancer_out_after_s"] is not None and row["balancer_out_after_s"] <= 5.0, row
    assert row["sent_after_out"] > 0 and row["hurt_after_out"] == 0, row
    assert set(row["outcomes"]) == {"ok"}, row
