"""README.md's CPU quick start, run as written: its bash block (less the install line: this environment
has it) on a free port, in a scratch directory. A new user's first hour: the tiny model is built, the
server answers two keys through the ``openai`` client, ``/fairness`` lists exactly those two clients (the
``/health`` probes and SGLang's warm-up apart, under ``internal``), and ``serve`` printed its one ready
line, without the noise SGLang prints by default."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fair.harness.server import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### A fair server on CPU, from a fresh clone"
PORT = "30000"


def quickstart() -> str:
    """The first bash block after :data:`HEADING` in README.md."""
    text = (ROOT / "README.md").read_text()
    start = text.index(HEADING)
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block is not None, "README.md: no bash block after the quick-start heading"
    return block.group(1)


def as_run_here(script: str, port: int) -> str:
    """The block for this checkout: its venv and scripts, another port, no install line."""
    lines = [line for line in script.splitlines() if not line.startswith("bash scripts/install_sglang_cpu")]
    assert len(lines) < len(script.splitlines()), "the quick start no longer starts with the install"
    body = "\n".join(lines).replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    return body.replace("scripts/", f"{ROOT}/scripts/").replace(PORT, str(port))


def test_the_readme_cpu_quick_start_runs_as_written(tmp_path: Path) -> None:
    port = free_port()
    script = tmp_path / "quickstart.sh"
    script.write_text("set -euo pipefail\n" + as_run_here(quickstart(), port) + "\nwait\n")
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_CPU_OMP_THREADS_BIND"}
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=420)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of the server may outlive the test
    (tmp_path / "out.txt").write_text(out)
    print(out[-3000:])
    assert proc.returncode == 0, out[-3000:]
    ready = [line for line in out.splitlines() if line.startswith("sglang-fair: ready on ")]
    assert ready == [f"sglang-fair: ready on http://127.0.0.1:{port}: admission dlpm_light on 1 worker; "
                     f"per-client figures at http://127.0.0.1:{port}/fairness (with an API key), "
                     f"the page at http://127.0.0.1:{port}/fairness/ui"], out[-3000:]
    for key in ("key-alice", "key-bob"):  # repr() quotes with " when the random reply holds a '
        assert re.search(rf"^{key} -> (['\"]).*\1$", out, re.M), out[-3000:]
    books = json.loads(next(line for line in out.splitlines() if line.startswith('{"policy"')))
    assert set(books["clients"]) == {"alice", "bob"}, books
    assert all(row["requests"] == 1 for row in books["clients"].values()), books
    assert "__probe__" in books["internal"] and "__warmup__" in books["internal"], books
    assert "server_args=" not in out and "UserWarning" not in out  # SGLang's start-up noise (quiet.py)
