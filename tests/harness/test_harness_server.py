"""The e2e harness's server start: a port taken before the server binds it is retried on another; a CPU
server without a token limit is refused; the memory of the servers it starts is sampled."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sglang_fair.harness import memory, server

LIMIT = ("--max-total-tokens", "4000")

FAKE = '''
import http.server, sys
from pathlib import Path
port = int(sys.argv[sys.argv.index("--port") + 1])
tries = Path(sys.argv[sys.argv.index("--model-path") + 1]) / "tries"
tries.write_text(tries.read_text() + "x" if tries.exists() else "x")
if len(tries.read_text()) <= int(Path(tries.parent / "taken").read_text()):
    print(f"ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
          "address already in use", flush=True)
    http.server.time.sleep(600)  # as SGLang: the HTTP server failed, the other processes wait
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
'''


@pytest.mark.parametrize("taken", [1, server.PORT_TRIES])
def test_a_taken_port_is_retried_on_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            taken: int) -> None:
    """``taken`` tries find their port taken; the control (every try taken) fails with PortTaken
    at once instead of waiting out the timeout."""
    (tmp_path / "fake_server.py").write_text(FAKE)
    (tmp_path / "taken").write_text(str(taken))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    log = tmp_path / "server.log"
    if taken < server.PORT_TRIES:
        with server.running_server(tmp_path, LIMIT, log, timeout=30, module="fake_server") as url:
            assert urllib.request.urlopen(url + "/health", timeout=5).status == 200
        assert (tmp_path / "tries").read_text() == "x" * (taken + 1)
    else:
        with pytest.raises(server.PortTaken), server.running_server(tmp_path, LIMIT, log, timeout=30,
                                                                     module="fake_server"):
            pass
        assert (tmp_path / "tries").read_text() == "x" * server.PORT_TRIES
    assert log.read_text().count("address already in use") == taken  # every try's output kept


@pytest.mark.parametrize("args", [(), ("--max-running-requests", "8"), ("--max-total-tokens-x", "1")])
def test_a_cpu_server_without_a_token_limit_is_refused(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Without --max-total-tokens SGLang sizes its KV pool from the machine's free memory (20.8 GB for
    the tiny model): refused before anything starts; the controls with a limit pass."""
    log = tmp_path / "server.log"
    with pytest.raises(server.NoTokenLimit, match="--max-total-tokens"), \
            server.running_server(tmp_path, args, log, timeout=5, module="no_such_module"):
        pass
    assert not log.exists()  # nothing was started
    for limited in ((*args, *LIMIT), (*args, "--max-total-tokens=4000")):
        assert "--max-total-tokens" in " ".join(server.cpu_server_cmd(tmp_path, 1, limited))


ALLOCATE = """
import subprocess, sys, time
if sys.argv[1] == "parent":
    child = subprocess.Popen([sys.executable, __file__, "child"])
    block = bytearray(32 * 2**20)
    print("ready", flush=True)
    child.wait()
else:
    block = bytearray(160 * 2**20)  # touched: resident
    time.sleep(30)
"""


def test_the_sampler_sees_a_servers_whole_tree_and_its_budget(tmp_path: Path) -> None:
    """A 'server' whose child holds 160 MiB: its peak counts the child; it is over a 128 MiB budget and
    under a 1 GiB one (the control)."""
    pytest.importorskip("psutil")
    script = tmp_path / "alloc.py"
    script.write_text(ALLOCATE)
    sampler = memory.PeakSampler(interval=0.1)
    sampler.enabled = True
    proc = subprocess.Popen([sys.executable, str(script), "parent"], stdout=subprocess.PIPE,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        sampler.watch("alloc", proc)
        deadline = time.monotonic() + 20
        while sampler.peaks[0].pss < 190 * 2**20 and time.monotonic() < deadline:
            time.sleep(0.1)
        sampler.unwatch(proc)
    finally:
        server.stop(proc)
    (peak,) = sampler.take()
    assert peak.pss >= 190 * 2**20 and peak.largest_rss >= 160 * 2**20, peak
    assert memory.over_budget([peak], 128 * 2**20) == [peak]
    assert memory.over_budget([peak], memory.GIB) == []
    assert sampler.take() == []  # taken once


def test_a_disabled_sampler_watches_nothing() -> None:
    sampler = memory.PeakSampler()
    sampler.watch("x", subprocess.Popen([sys.executable, "-c", "pass"]))
    assert sampler.take() == [] and sampler._thread is None
