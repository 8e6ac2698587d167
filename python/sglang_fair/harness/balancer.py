"""HAProxy in front of the gateway replicas of a :class:`~sglang_fair.harness.cluster.Cluster` (the chaos
run, the soak and their tests): Debian's ``haproxy`` with the repository's ``docker/haproxy/haproxy.cfg``,
the file the compose fleet profiles run and docs/guides/fleet.md shows, its addresses from the environment.

Clients send to :attr:`Balancer.url`; HAProxy checks each gateway's ``/health`` every second, takes one
out after two failed checks and back after two passed ones, and retries on the other gateway only a
request that never reached one (a refused or timed-out connection). :meth:`Balancer.stats` reads its
per-gateway counters (the stats page's CSV).
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from sglang_fair.harness.proc import Proc, free_ports

CONFIG = Path(__file__).resolve().parents[3] / "docker" / "haproxy" / "haproxy.cfg"
COUNTERS = {"stot": "sessions", "wretr": "retries", "wredis": "redispatches", "chkdown": "taken_out",
            "downtime": "down_s", "hrsp_5xx": "answers_5xx"}


def haproxy_binary() -> str:
    path = shutil.which("haproxy")
    if path is None:
        raise FileNotFoundError("haproxy is not installed (Debian: apt-get install --no-install-recommends "
                                "haproxy; scripts/install_test_tools.sh)")
    return path


class Balancer:
    """One HAProxy process over ``gateways`` (their base URLs, two), logging to ``log``."""

    def __init__(self, gateways: Sequence[str], log: Path, config: Path = CONFIG) -> None:
        if len(gateways) != 2:
            raise ValueError(f"the configuration fronts two gateways, got {len(gateways)}")
        if not config.is_file():
            raise FileNotFoundError(f"{config}: the HAProxy configuration (run from a source checkout)")
        port, stats_port = free_ports(2)
        self.url, self.stats_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{stats_port}"
        self.config, self.log = config, log
        self.env = dict(os.environ, LB_BIND=f"127.0.0.1:{port}", LB_STATS_BIND=f"127.0.0.1:{stats_port}",
                        **{f"GATEWAY_{k + 1}": urlsplit(url).netloc for k, url in enumerate(gateways)})
        self.proc: Proc | None = None

    def start(self, timeout: float = 30.0) -> None:
        """Start HAProxy and wait until it reports every gateway up."""
        self.proc = Proc("haproxy", [haproxy_binary(), "-db", "-f", str(self.config)], self.url, self.log,
                         self.env)
        self.proc.start()
        self.wait_for("UP", timeout)

    def wait_for(self, status: str, timeout: float, server: str | None = None) -> float:
        """Seconds until ``server`` (every gateway when None) reports ``status`` (TimeoutError after
        ``timeout``)."""
        began = time.monotonic()
        while True:
            popen = self.proc.popen if self.proc is not None else None
            if popen is not None and popen.poll() is not None:
                tail = self.log.read_text()[-1500:]
                raise RuntimeError(f"haproxy exited ({popen.returncode}): {tail}")
            try:
                rows = self.stats()
                if all(r["status"].split(" ")[0] == status for name, r in rows.items()
                       if server is None or name == server):
                    return time.monotonic() - began
            except OSError:
                pass
            if time.monotonic() - began > timeout:
                raise TimeoutError(f"haproxy: {server or 'the gateways'} not {status} after {timeout:g} s")
            time.sleep(0.2)

    def stats(self) -> dict[str, dict[str, str]]:
        """Per gateway (``gateway-1``, ``gateway-2``): HAProxy's status and :data:`COUNTERS`."""
        with urllib.request.urlopen(self.stats_url + "/stats;csv", timeout=5) as resp:
            text = resp.read().decode()
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        mine = [r for r in rows if r["pxname"] == "gateways" and r["svname"] not in ("FRONTEND", "BACKEND")]
        return {r["svname"]: {"status": r["status"], **{n: r[key] or "0" for key, n in COUNTERS.items()}}
                for r in mine}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
