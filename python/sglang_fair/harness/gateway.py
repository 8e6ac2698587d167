"""Start and stop ``sglang-fair gateway`` in front of running servers (for e2e tests and benchmarks)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sglang_fair.harness.server import free_port, stop, wait_ready


@contextmanager
def running_gateway(servers: Sequence[str], args: Sequence[str], log: Path,
                    timeout: float = 60.0) -> Iterator[str]:
    """Run ``sglang-fair gateway --worker-urls SERVERS ARGS`` on a free port; yield its base URL once
    its ``/health`` answers (after discovery); stop it on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "sglang_fair.cli", "gateway", "--worker-urls", ",".join(servers),
           "--port", str(port), *args]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_ready(url, proc, timeout)
        except (RuntimeError, TimeoutError) as err:
            raise RuntimeError(f"the gateway did not start: {err}\n{log.read_text()[-2000:]}") from None
        yield url
    finally:
        stop(proc)
