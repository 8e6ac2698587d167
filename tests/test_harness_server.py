"""The e2e harness's server start: a port taken before the server binds it is retried on another."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from sglang_fair.harness import server

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
        with server.running_server(tmp_path, [], log, timeout=30, module="fake_server") as url:
            assert urllib.request.urlopen(url + "/health", timeout=5).status == 200
        assert (tmp_path / "tries").read_text() == "x" * (taken + 1)
    else:
        with pytest.raises(server.PortTaken), server.running_server(tmp_path, [], log, timeout=30,
                                                                     module="fake_server"):
            pass
        assert (tmp_path / "tries").read_text() == "x" * server.PORT_TRIES
    assert log.read_text().count("address already in use") == taken  # every try's output kept
