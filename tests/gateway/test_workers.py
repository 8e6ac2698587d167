"""``sglang-fair gateway --workers N``: N processes on one port, sharing what they route, supervised.

Each test starts the command as a user does (``python -m sglang_fair gateway``) against the fake
servers (``fake_sglang.py``) and reads every process's own ``/gateway/state`` on its Unix socket.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fake_sglang import FakeSGLang, Running
from prometheus_client.parser import text_string_to_metric_families

from sglang_fair.cli import main
from sglang_fair.harness.server import free_port

pytestmark = pytest.mark.timers
READY = re.compile(r"ready on http://\S+ with (\d+) processes .* in (\S+)\)")


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.path)


def get(path: str, what: str) -> bytes:
    """GET ``what`` from one process's own socket ``path``."""
    conn = UnixHTTP(path)
    try:
        conn.request("GET", what)
        return conn.getresponse().read()
    finally:
        conn.close()


class Gateway:
    """A running ``gateway --workers N``: its port, directory, and a reader of its output."""

    def __init__(self, proc: subprocess.Popen[str], port: int, directory: str, count: int) -> None:
        self.proc, self.port, self.directory, self.count = proc, port, directory, count
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def state(self, index: int) -> dict[str, Any]:
        return dict(json.loads(get(f"{self.directory}/http-{index}.sock", "/gateway/state")))

    def states(self) -> list[dict[str, Any]]:
        return [self.state(i) for i in range(self.count)]


@contextmanager
def gateway(urls: list[str], *flags: str) -> Iterator[Gateway]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "sglang_fair", "gateway", "--worker-urls", ",".join(urls),
                             "--port", str(port), *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert proc.stdout is not None
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if found := READY.search(line):
                break
        else:
            raise AssertionError("the gateway exited before it was ready:\n" + "".join(seen))
        running = Gateway(proc, port, found.group(2), int(found.group(1)))
        running.lines[:0] = seen
        yield running
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def chat(port: int, client: str) -> int:
    body = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": f"hello from {client}"}]})
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body.encode(),
                                 headers={"content-type": "application/json", "x-client-id": client})
    with urllib.request.urlopen(req, timeout=20) as resp:  # a new connection each time
        return int(resp.status)


def until(condition: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("value", ["0", "-2", "257"])
def test_bad_worker_counts_are_refused(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gateway", "--worker-urls", "http://127.0.0.1:1", "--workers", value]) != 0
    assert "--workers must be in 1..256" in capsys.readouterr().err


def test_a_worker_count_that_is_not_a_number_and_unsupported_pairs_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["gateway", "--worker-urls", "http://127.0.0.1:1", "--workers", "two"])
    assert exit_.value.code == 2 and "invalid int value: 'two'" in capsys.readouterr().err
    for pair in (["--peer-port", "30090"], ["--ext-proc-port", "30091"]):
        assert main(["gateway", "--worker-urls", "http://127.0.0.1:1", "--workers", "2", *pair]) != 0
        assert "--workers > 1 with " + pair[0] in capsys.readouterr().err


def test_a_port_in_use_is_refused_before_any_process_starts(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        assert main(["gateway", "--worker-urls", "http://127.0.0.1:1", "--workers", "2", "--port", port]) == 2
    assert f"--port {port}: cannot listen: the port is in use" in capsys.readouterr().err


def test_two_processes_serve_one_port_and_see_each_others_requests() -> None:
    """Requests on the one port are served by both processes, and each process's routing state holds
    every request in flight, its own and the other's (the queue sizes of the policy) and, once they
    end, the other's as observed. Without the replica link a process's queue would hold only what it
    routed itself, which is fewer than all for each (both served): the same assertions fail."""
    release = threading.Event()
    servers = [FakeSGLang(hold_whole=release), FakeSGLang(hold_whole=release)]
    held = 12
    with Running(*servers) as urls, gateway(urls, "--workers", "2", "--router-policy", "round_robin") as gw:
        assert [s["process"]["index"] for s in gw.states()] == [0, 1]
        threads = [threading.Thread(target=chat, args=(gw.port, f"c{i % 3}")) for i in range(held)]
        try:
            for thread in threads:
                thread.start()
            until(lambda: sum(len(s.relayed()) for s in servers) == held, "the held requests are relayed")
            states = gw.states()
            routed = [sum(w["routed"] for w in s["workers"]) for s in states]
            assert sum(routed) == held and all(0 < r < held for r in routed), routed  # both served
            until(lambda: all(sum(w["queue"] for w in s["workers"]) == held for s in gw.states()),
                  f"every process holds all {held} requests in flight")
            queues = [[w["queue"] for w in s["workers"]] for s in gw.states()]
            assert queues[0] == queues[1], queues
        finally:
            release.set()
            for thread in threads:
                thread.join(20)
        until(lambda: all(sum(w["queue"] for w in s["workers"]) == 0 for s in gw.states()), "all finished")
        states = gw.states()
        for mine, other in ((states[0], states[1]), (states[1], states[0])):
            assert [w["observed"] for w in mine["workers"]] == [w["routed"] for w in other["workers"]]
        pids = [s["process"]["pid"] for s in states]
        gw.proc.send_signal(signal.SIGTERM)
        assert gw.proc.wait(30) == 0
        assert not any(alive(pid) for pid in pids)
        assert not os.path.exists(gw.directory)


def counters(text: str, *names: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The samples of families ``names`` in a ``/metrics`` text, by (name, labels)."""
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            if family.name in names for s in family.samples}


def test_the_shared_ports_metrics_are_the_sum_of_the_processes_own() -> None:
    """Requests until both processes served some; then the shared port's request counters equal the
    sum of the two Unix sockets' own (any one process alone, what the port answered before, has fewer:
    the control), ``?process=self`` is one process's own, and both processes answered."""
    names = ("sglang_fair_gateway_client_answers", "sglang_fair_gateway_worker_routed")
    with Running(FakeSGLang(), FakeSGLang()) as urls, gateway(urls, "--workers", "2") as gw:
        sent = 0
        while sent < 8 or not all(sum(w["routed"] for w in s["workers"]) for s in gw.states()):
            assert chat(gw.port, f"c{sent % 3}") == 200 and sent < 200, "one process served every request"
            sent += 1
        own = [get(f"{gw.directory}/http-{i}.sock", "/metrics").decode() for i in range(2)]
        parts = [counters(text, *names) for text in own]
        summed = {k: parts[0].get(k, 0.0) + parts[1].get(k, 0.0) for k in parts[0].keys() | parts[1].keys()}
        with urllib.request.urlopen(f"http://127.0.0.1:{gw.port}/metrics", timeout=10) as resp:
            shared = resp.read().decode()
        assert counters(shared, *names) == summed
        assert sum(v for (n, _), v in summed.items() if n.endswith("routed_total")) == sent
        assert all(part != summed for part in parts)  # the control: one process alone is not the whole
        assert "sglang_fair_gateway_processes_answered 2.0" in shared
        with urllib.request.urlopen(f"http://127.0.0.1:{gw.port}/metrics?process=self", timeout=10) as resp:
            alone = counters(resp.read().decode(), *names)
        assert alone in parts
        gw.proc.send_signal(signal.SIGTERM)
        assert gw.proc.wait(30) == 0


def test_a_killed_process_is_started_again_and_counted() -> None:
    with Running(FakeSGLang()) as urls, gateway(urls, "--workers", "2") as gw:
        victim = gw.state(0)["process"]["pid"]
        os.kill(victim, signal.SIGKILL)
        until(lambda: any("starting it again (restart 1)" in line for line in gw.lines), "a restart line", 30)

        def restarted() -> bool:
            try:
                return bool(gw.state(0)["process"]["pid"] != victim)
            except OSError:
                return False
        until(restarted, "process 0 answers again", 30)
        assert [s["process"]["restarts"] for s in gw.states()] == [1, 1]
        metrics = get(f"{gw.directory}/http-1.sock", "/metrics").decode()
        assert "sglang_fair_gateway_process_restarts_total 1.0" in metrics
        assert "sglang_fair_gateway_processes 2.0" in metrics
        assert chat(gw.port, "a") == 200
        gw.proc.send_signal(signal.SIGTERM)
        assert gw.proc.wait(30) == 0


def test_with_no_restarts_allowed_a_killed_process_stops_the_whole_gateway() -> None:
    """The control: where the parent may not restart, it does not serve on with fewer processes."""
    with Running(FakeSGLang()) as urls, gateway(urls, "--workers", "2", "--worker-restarts", "0") as gw:
        pids = [s["process"]["pid"] for s in gw.states()]
        os.kill(pids[0], signal.SIGKILL)
        assert gw.proc.wait(40) == 4
        assert not alive(pids[1])
        assert any("stopping the gateway" in line for line in gw.lines)


def test_a_killed_parent_takes_its_children_and_their_files_with_it() -> None:
    """SIGKILL of the parent (its own supervisor gave up on it): the children drain and exit on their
    own, and the last removes the private directory."""
    with Running(FakeSGLang()) as urls, gateway(urls, "--workers", "2") as gw:
        pids = [s["process"]["pid"] for s in gw.states()]
        gw.proc.kill()
        gw.proc.wait(10)
        until(lambda: not any(alive(pid) for pid in pids), "the children exit", 30)
        until(lambda: not os.path.exists(gw.directory), "the directory is removed", 10)
