"""The harness's one process launcher: a command in its own session, its output appended to its log,
ready when ``/health`` answers, restarted, stopped with its whole group; a process that exits early
fails with its log's tail."""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sglang_fair.harness.proc import Proc, free_port

HEALTH = '''
import http.server, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("child", child.pid, flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
'''


def gone(pid: int, within: float = 10.0) -> bool:
    """``pid`` has exited (or is a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_process_starts_answers_restarts_and_stops_with_its_group(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "health.py").write_text(HEALTH)
    proc = Proc("health", [sys.executable, str(tmp_path / "health.py"), str(port)],
                f"http://127.0.0.1:{port}", tmp_path / "health.log")
    popen = proc.start()
    try:
        proc.wait_ready(30)
        assert urllib.request.urlopen(proc.url + "/health", timeout=5).status == 200
        assert os.getpgid(popen.pid) == popen.pid != os.getpgid(0)  # its own session
        child = int(proc.log.read_text().split()[1])
        proc.stop()
        assert proc.popen is None and popen.returncode == -signal.SIGTERM and gone(child)
        assert proc.restart(30) > 0 and proc.since > 0  # the log keeps both starts
        assert proc.log.read_text().count("child") == 2
    finally:
        proc.stop()


def test_a_process_that_exits_early_fails_with_its_log(tmp_path: Path) -> None:
    proc = Proc("early", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
                f"http://127.0.0.1:{free_port()}", tmp_path / "early.log")
    proc.start()
    with pytest.raises(RuntimeError, match=r"early did not start: .*code 3(.|\n)*boom"):
        proc.wait_ready(30)
    proc.stop()
