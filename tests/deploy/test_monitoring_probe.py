"""``sglang-fair lab monitoring-probe`` (docker_check.sh's monitoring and load-balancer checks) without an
engine: against a stand-in Prometheus, load balancer and HAProxy stats page that behave (it passes), and
that each get one thing wrong (it must fail and name the check)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from deploy_support import DOCKER
from stand_in import StandIn, stand_ins

from sglang_fair.lab import monitoring_probe as probe

JOBS = {"sglang-fair": 2, "sglang-fair-gateway": 2, "haproxy": 1}
STATS = "# pxname,svname,status\nsglang_fair,FRONTEND,OPEN\ngateways,gateway-1,{g1}\ngateways,gateway-2,UP\n"


class Stand(StandIn):
    """Prometheus's API, the load balancer's chat endpoint and HAProxy's stats, in one; ``fault`` breaks one
    thing; ``shared['served']`` counts the chats (the client's series move with it)."""

    fault = ""
    shared: dict[str, Any] = {}  # noqa: RUF012  (each stand-in gets its own subclass and dict)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.fault == "lb refuses":
            return self.answer(503, {"message": "no server available"})
        self.shared["served"] += 1
        if body.get("model") != "default" and self.fault != "any model":
            return self.answer(404, {"message": f"the model {body.get('model')} does not exist"})
        self.answer(200, {"choices": [{"message": {"content": "x"}}]})

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/stats;csv":
            state = "DOWN" if self.fault != "lb keeps it" else "UP"
            return self.answer(200, STATS.format(g1=state), "text/csv")
        if url.path == "/api/v1/targets":
            down = self.fault == "target down"
            targets = [{"labels": {"job": job}, "health": "down" if down and job == "haproxy" else "up",
                        "scrapeUrl": f"http://{job}-{k}/metrics", "lastError": ""}
                       for job, n in JOBS.items() for k in range(n)]
            return self.answer(200, {"status": "success", "data": {"activeTargets": targets}})
        expr = urllib.parse.parse_qs(url.query)["query"][0]
        if "(" in expr and expr.count("(") != expr.count(")"):
            return self.answer(400, {"status": "error", "error": "parse error"})
        moving = self.fault != "series still"
        result = [] if (self.fault == "empty panel" and "backlogged_gap" in expr) or "router" in expr else [
            {"metric": {}, "value": [0, str(self.shared["served"] if moving else 1)]}]
        self.answer(200, {"status": "success", "data": {"resultType": "vector", "result": result}})


@pytest.fixture
def stand() -> Iterator[Callable[[str], str]]:
    with stand_ins() as start:
        yield lambda fault="": start(type("H", (Stand,), {"fault": fault, "shared": {"served": 0}}))


def checks(url: str) -> list[list[str]]:
    dashboard = str(DOCKER / "grafana" / "dashboards" / "sglang-fair.json")
    common = ["--prometheus", url, "--wait", "1"]
    return [[*common, "targets", "--expect", "sglang-fair=2,sglang-fair-gateway=2,haproxy=1"],
            [*common, "moves", "--lb", url, "--key", "k", "--client", "team-a", "--count", "2"],
            [*common, "dashboard", "--file", dashboard],
            [*common, "lb", "--stats", url, "--server", "gateway-1", "--state", "DOWN"]]


def test_a_fleet_that_behaves_passes(stand: Callable[[str], str], capsys: pytest.CaptureFixture[str]) -> None:
    url = stand("")
    assert [probe.main(argv) for argv in checks(url)] == [0, 0, 0, 0]
    out = capsys.readouterr().out
    assert "every target up" in out and "team-a's service at the servers 0 -> 4" in out
    assert "router panels: valid" in out and "HAProxy: gateway-1 DOWN" in out


@pytest.mark.parametrize(("fault", "check"), [
    ("target down", 0), ("lb refuses", 1), ("series still", 1), ("any model", 1), ("empty panel", 2),
    ("lb keeps it", 3)])
def test_each_fault_fails_its_check_and_names_it(stand: Callable[[str], str], fault: str, check: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    argv = checks(stand(fault))[check]
    assert probe.main(argv) == 1
    assert capsys.readouterr().out.startswith(f"FAILED {argv[4]}:")
