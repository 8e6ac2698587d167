"""The harness's one process launcher: :class:`Proc` runs a command in its own session (so a signal
reaches its whole group) with its output appended to a log file, waits until its ``/health`` answers
200, and stops it (SIGTERM to the group, SIGKILL after 15 s). ``running_server``, ``running_gateway``,
the cluster and its load balancer start their processes with it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglang_fair.harness.memory import SAMPLER

PORT_TAKEN = b"address already in use"


class PortTaken(RuntimeError):
    """The server's HTTP port was taken between choosing it and binding it (SGLang binds it only after
    loading the model; its own processes pick ports meanwhile): its HTTP server failed, the rest waits."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports (all held open while chosen: ports chosen one at a time can repeat)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float, log: Path | None = None,
               since: int = 0) -> None:
    """Poll ``/health`` until it answers 200; raise if the process exits, its ``log`` (from byte
    ``since``) says its port was taken (:class:`PortTaken`), or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process exited with code {proc.returncode} before becoming ready")
        if log is not None and PORT_TAKEN in log.read_bytes()[since:]:
            raise PortTaken(f"{url}: {PORT_TAKEN.decode()} (see {log})")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} not ready after {timeout:.0f} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the process group of ``proc`` (SIGTERM, then SIGKILL after 15 s)."""
    if proc.poll() is not None:
        return
    pgid = os.getpgid(proc.pid)
    os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout=15)


@dataclass
class Proc:
    """One process: how to start it, and its running process (None: not started or gone)."""

    name: str
    cmd: list[str]
    url: str
    log: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    popen: subprocess.Popen[bytes] | None = None
    sampled: bool = False  # its memory is sampled (an SGLang server)
    since: int = 0  # where the current start's output begins in the log

    def start(self) -> subprocess.Popen[bytes]:
        """Start the command in its own session, its output appended to the log."""
        self.since = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as fh:
            self.popen = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env,
                                          start_new_session=True)
        if self.sampled:
            SAMPLER.watch(self.name, self.popen)
        return self.popen

    def wait_ready(self, timeout: float) -> None:
        """Wait for ``/health`` (:func:`wait_ready`); a failure other than :class:`PortTaken` raises
        ``RuntimeError`` with the log's tail."""
        assert self.popen is not None
        try:
            wait_ready(self.url, self.popen, timeout, self.log, self.since)
        except PortTaken:
            raise
        except (RuntimeError, TimeoutError) as err:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} did not start: {err}\n{tail}") from None

    def restart(self, timeout: float) -> float:
        """Start again (after :meth:`kill` or :meth:`stop`) and wait until ready; the seconds it took."""
        began = time.monotonic()
        self.start()
        self.wait_ready(timeout)
        return time.monotonic() - began

    def signal(self, sig: int, scheduler_only: bool = False) -> None:
        """Send ``sig`` to the whole process group, or only to the scheduler process under it."""
        assert self.popen is not None
        if scheduler_only:
            self.scheduler().send_signal(sig)
        else:
            os.killpg(os.getpgid(self.popen.pid), sig)

    def scheduler(self) -> Any:
        """The one SGLang scheduler process under this one (a ``psutil.Process``)."""
        import psutil

        assert self.popen is not None
        found = [p for p in psutil.Process(self.popen.pid).children(recursive=True)
                 if "scheduler" in " ".join(p.cmdline())]
        if len(found) != 1:
            raise RuntimeError(f"{self.name}: expected one scheduler process, found {len(found)}")
        return found[0]

    def kill(self) -> None:
        """SIGKILL to the whole group, then reap it (what SGLang left behind is gone too)."""
        if self.popen is None:
            return
        SAMPLER.unwatch(self.popen)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(self.popen.pid), signal.SIGKILL)
        self.popen.wait(timeout=30)
        self.popen = None

    def stop(self) -> None:
        """SIGTERM to the whole group, SIGKILL after 15 s (:func:`stop`)."""
        if self.popen is not None:
            SAMPLER.unwatch(self.popen)
            stop(self.popen)
            self.popen = None
