"""The fairness page in headless Chromium against the real cluster (two CPU servers, two gateways behind
HAProxy) after keyed traffic: at a server and at a gateway it draws an area for every client served in
its window and a row per client with /fairness's numbers, fetches nothing from elsewhere and logs no error.
Screenshots: out/test-artifacts/ (SGLANG_FAIR_ARTIFACTS)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from sglang_fair.harness.browser import find_chromium
from sglang_fair.harness.chaos import ADMIN, DEADLINE_S, drained, specs
from sglang_fair.harness.cluster import Cluster
from sglang_fair.harness.page_check import drawn_problems, look, series_problems
from sglang_fair.harness.server import get_json
from sglang_fair.harness.traffic import Traffic

pytestmark = [pytest.mark.e2e, pytest.mark.timers]
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("SGLANG_FAIR_ARTIFACTS", ROOT / "out" / "test-artifacts"))


def service(cluster: Cluster, url: str) -> dict[str, float]:
    auth = {"Authorization": f"Bearer {cluster.keys[ADMIN]}"}
    return {c: float(f["service"]) for c, f in get_json(url + "/fairness", headers=auth)["clients"].items()}


def test_the_page_draws_what_fairness_says_at_a_server_and_at_a_gateway(cluster: Cluster) -> None:
    if find_chromium() is None:
        if "chromium" in os.environ.get("SGLANG_FAIR_REQUIRE_TOOLS", ""):
            pytest.fail("chromium is not installed (scripts/install_test_tools.sh)")
        pytest.skip("chromium is not installed (scripts/install_test_tools.sh)")
    places = {"server-a": cluster.servers[0].url, "gateway-1": cluster.gateways[0].url}
    before = {name: service(cluster, url) for name, url in places.items()}
    traffic = Traffic(cluster.balancer.url, specs(cluster.keys), DEADLINE_S).start()
    time.sleep(8.0)
    traffic.stop()
    drained(cluster)
    time.sleep(2.5)  # one more sample (and the gateway's poll of the servers) after the last answer
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    auth = {"Authorization": f"Bearer {cluster.keys[ADMIN]}"}
    for name, url in places.items():
        visit = look(url, cluster.keys[ADMIN], renders=2)
        (ARTIFACTS / f"fairness_page_{name}.png").write_bytes(visit.screenshot)
        fairness: dict[str, Any] = get_json(url + "/fairness", headers=auth)
        served = {c for c, s in service(cluster, url).items() if s > before[name].get(c, 0.0)}
        assert served, (name, fairness)
        assert drawn_problems(visit, fairness, url) == [], name
        assert series_problems(visit, served) == [], (name, visit.value["areas"])
        assert len(visit.value["workers"]) == (1 if name.startswith("server") else 2), visit.value
