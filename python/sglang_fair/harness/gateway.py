"""Start and stop ``sglang-fair gateway`` in front of running servers (for e2e tests and benchmarks)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sglang_fair.harness.proc import Proc, free_port


@contextmanager
def running_gateway(servers: Sequence[str], args: Sequence[str], log: Path,
                    timeout: float = 60.0) -> Iterator[str]:
    """Run ``sglang-fair gateway --worker-urls SERVERS ARGS`` on a free port; yield its base URL once
    its ``/health`` answers (after discovery); stop it on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "sglang_fair.cli", "gateway", "--worker-urls", ",".join(servers),
           "--port", str(port), *args]
    proc = Proc("the gateway", cmd, f"http://127.0.0.1:{port}", log)
    log.write_bytes(b"")
    proc.start()
    try:
        proc.wait_ready(timeout)
        yield proc.url
    finally:
        proc.stop()
