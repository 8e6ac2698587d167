"""``sglang-fair lab fleet-probe`` (docker_check.sh's fleet steps) without an engine: against a stand-in
gateway and two stand-in servers that behave (it passes) and that each get one thing wrong (it must fail
and name that check); and docker_check.sh's header lists exactly the steps it runs, in order."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from deploy_support import ROOT

from sglang_fair.lab import fleet_probe

SERVERS = ("http://sglang-fair-cpu-a:30000", "http://sglang-fair-cpu-b:30000")  # as the gateway names them


class Handler(BaseHTTPRequestHandler):
    """The gateway (``role`` gateway) or a server; ``fault`` breaks one thing; ``shared`` is the fleet's."""

    role = "gateway"
    fault = ""
    shared: dict[str, Any] = {}  # noqa: RUF012  (each fleet gets its own subclass and dict)

    def log_message(self, *args: Any) -> None:
        pass

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.role == "server":
            if "routed_dp_rank" in body and self.fault != "pin accepted":
                return self.answer(403, {"message": "a pinned rank needs the trusted gateway's token"})
            return self.answer(200, {"choices": [{"message": {"content": "x"}}]})
        if self.headers.get("Authorization") != "Bearer sk-a" and self.fault != "any key":
            return self.answer(401, {"message": "unknown key"})
        up = [s for s in SERVERS if s not in self.shared["out"]]
        turn = self.shared["turn"] = self.shared["turn"] + 1
        server = up[0] if self.fault == "one server" else up[turn % len(up)]
        self.shared["routed"][server] += 1
        self.answer(200, {"choices": [{"message": {"content": "x"}}]})

    def do_GET(self) -> None:
        workers = [{"server": s, "rank": 0, "routed": n} for s, n in self.shared["routed"].items()]
        out = dict.fromkeys(self.shared["out"], "failed its health probe")
        age = 9.0 if self.fault == "silent feedback" else 0.2
        feedback = {"heartbeats": 40, "evictions": 0, "workers": {"0": {"heartbeat_age_s": 0.1, "loops": 7},
                                                                  "1": {"heartbeat_age_s": age, "loops": 3}}}
        run = {"name": "gateway-2", "hears_me": self.fault != "deaf peer", "same_workers": True}
        peers = {"runs": {"r1": run}}
        self.answer(200, {"workers": workers, "servers_out": out, "feedback": feedback, "peers": peers,
                          "observed_from_peers": 3})


@pytest.fixture
def fleet() -> Iterator[Any]:
    started: list[ThreadingHTTPServer] = []

    def start(fault: str = "", out: tuple[str, ...] = ()) -> Any:
        shared = {"turn": 0, "routed": dict.fromkeys(SERVERS, 0), "out": set(out)}
        urls = []
        for role in ("gateway", "server", "server"):
            handler = type("H", (Handler,), {"role": role, "fault": fault, "shared": shared})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
            started.append(server)
            urls.append(f"http://127.0.0.1:{server.server_address[1]}")
        gateway = fleet_probe.ProbeConfig(urls[0], "-", timeout=10.0)
        return fleet_probe.Fleet(gateway, tuple(urls[1:]), "sk-a", wait=1.0), shared

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def run(fleet: Any, *argv: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    args = fleet_probe.parse(["--gateway", "-", "--servers", "-", "--key", "-", *argv])
    return fleet_probe.run(fleet, args, lines.append), lines


def test_a_fleet_that_behaves_passes(fleet: Any) -> None:
    code, lines = run(fleet()[0], "check")
    assert code == 0 and len(lines) == 5 and all(line.startswith("ok ") for line in lines), lines
    code, lines = run(fleet()[0], "chats", "--count", "3")
    assert code == 0 and lines == ["ok chats through the gateway: 3 of 3 chats 200"], lines


@pytest.mark.parametrize(("fault", "failing"), [
    ("any key", "chat through the gateway with a wrong key"),
    ("pin accepted", "a pinned routed_dp_rank straight to each server"),
    ("one server", "/gateway/state: both servers' workers, requests routed to each"),
    ("silent feedback", "/gateway/state: every worker's heartbeats over the feedback ports"),
])
def test_a_fleet_that_gets_one_thing_wrong_is_named(fleet: Any, fault: str, failing: str) -> None:
    code, lines = run(fleet(fault)[0], "check")
    assert code == 1 and lines[-1].startswith(f"FAILED {failing}:"), lines


def test_out_and_back_follow_the_gateways_state(fleet: Any) -> None:
    probe, shared = fleet(out=(SERVERS[1],))
    assert run(probe, "out", "--server", "sglang-fair-cpu-b")[0] == 0
    code, lines = run(probe, "back", "--server", "sglang-fair-cpu-b")
    assert code == 1 and "still out" in lines[-1], lines  # never taken back
    shared["out"].clear()
    code, lines = run(probe, "back", "--server", "sglang-fair-cpu-b")
    assert code == 0 and "routed to again" in lines[-1], lines
    code, lines = run(probe, "out", "--server", "sglang-fair-cpu-a")
    assert code == 1 and "still in" in lines[-1], lines


def test_the_headers_steps_are_the_steps_run() -> None:
    script = (ROOT / "scripts" / "docker_check.sh").read_text()
    run_steps = re.findall(r"^step ([\w-]+)", script, re.M)
    header = script.split("\nset -euo pipefail")[0]
    listed = re.findall(r"^#   ([\w-]+) ", header, re.M)
    assert run_steps == listed and "fleet-up" in run_steps, (run_steps, listed)


def test_peers_needs_a_peer_heard_both_ways_and_its_dispatches_recorded(fleet: Any) -> None:
    code, lines = run(fleet()[0], "peers", "--count", "3")
    assert code == 0 and "hears gateway-2" in lines[-1] and "3 of the peers' dispatches" in lines[-1], lines
    code, lines = run(fleet()[0], "peers", "--count", "4")
    assert code == 1 and "fewer than 4" in lines[-1], lines
    code, lines = run(fleet("deaf peer")[0], "peers", "--count", "0")
    assert code == 1 and lines[-1].startswith("FAILED /gateway/state: a peer replica heard both ways"), lines
