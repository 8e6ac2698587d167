"""``sglang-fair gateway --workers N``: N gateway processes on one port, sharing what they route.

The parent binds ``--host:--port`` once and hands the listening socket to N children (``spawn``:
each a whole gateway, its own event loop, HTTP session and feedback listeners); the kernel gives each
new connection to whichever child accepts it first. One socket rather than ``SO_REUSEPORT`` (a socket
per child): connections queued on a child that dies stay queued for the others instead of being
reset, and no other process of the same user can join the port. The children are each other's replicas
(``peers.py``): each publishes its dispatches and finishes on ``ipc://DIR/peer-I`` and hears the
others', so their per-(client, worker) charges, queue sizes and trees converge within the bound of
docs/design/replicas.md. ``DIR`` is a private directory (mode 0700) made at start and removed at exit; each
child also answers HTTP on ``DIR/http-I.sock``, so one process's ``/gateway/state`` and ``/metrics``
can be read (the shared port gives any one of them, but its ``/metrics`` merges every process's:
``metrics_sum.py``).

The parent supervises: a child that dies after it was ready is started again with a log line and a
count (``sglang_fair_gateway_process_restarts_total``, ``process`` in ``/gateway/state``); a child that
dies before it is ready (at start or after a restart), or more than ``--worker-restarts`` restarts
within a minute, stops every child and the parent exits :data:`EXIT_PROCESS_FAILED`, so its own
supervisor restarts the whole gateway: never silently fewer processes. SIGTERM or SIGINT to the
parent is forwarded to every child as SIGTERM (each stops accepting and drains what it relays); the
parent exits 0 once all are gone.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sglang_fair.core.errors import ConfigError

if TYPE_CHECKING:
    from sglang_fair.gateway.config import GatewayConfig

logger = logging.getLogger("sglang_fair.gateway")
EXIT_PROCESS_FAILED = 4  # a child died before it was ready (2: it said the config is bad) or kept dying
RESTART_WINDOW_S = 60.0
DRAIN_S = 30.0  # after SIGTERM, how long the children may drain before they are killed
BACKLOG = 2048


@dataclass
class Child:
    """One child process: its index, the process, and the pipe it says "ready" on."""

    index: int
    process: Any
    ready: Any  # the parent's end of the pipe (None once heard)
    is_ready: bool = False


@dataclass(eq=False)  # a collector is registered by identity
class ProcessView:
    """What one child shows of itself: ``process`` in ``/gateway/state``, the ``..._process...`` metrics
    (``restarts`` is the parent's shared counter, the same in every child)."""

    index: int
    count: int
    pid: int
    socket: str  # its own HTTP endpoint, a Unix socket
    restarts: Any  # a multiprocessing.Value("i")

    def view(self) -> dict[str, Any]:
        return {"index": self.index, "processes": self.count, "pid": self.pid, "socket": self.socket,
                "restarts": int(self.restarts.value)}

    def collect(self) -> Iterator[Any]:
        """The Prometheus families (a collector): the processes, the restarts, which one answered."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        yield GaugeMetricFamily("sglang_fair_gateway_processes",
                                "gateway processes serving the port (--workers)", value=self.count)
        yield CounterMetricFamily("sglang_fair_gateway_process_restarts",
                                  "gateway processes that died and were started again (all processes)",
                                  value=int(self.restarts.value))
        yield GaugeMetricFamily("sglang_fair_gateway_process_index",
                                "which of the gateway's processes answered this scrape", value=self.index)


def http_socket(directory: str, index: int) -> str:
    """Process ``index``'s own HTTP endpoint, a Unix socket in the private ``directory``."""
    return os.path.join(directory, f"http-{index}.sock")


def listen(host: str, port: int) -> socket.socket:
    """The gateway's listening socket (a clear error if the port is taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        why = "the port is in use" if err.errno == errno.EADDRINUSE else str(err)
        raise ConfigError(f"--host {host} --port {port}: cannot listen: {why}") from None
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


class Supervisor:
    """The parent: starts the children, restarts the dead, forwards the stop signals."""

    def __init__(self, config: GatewayConfig, child: Callable[..., None], sock: socket.socket,
                 directory: str) -> None:
        self.config, self.child, self.sock, self.directory = config, child, sock, directory
        self.context = multiprocessing.get_context("spawn")
        self.restarts = self.context.Value("i", 0)  # shared with every child (its /metrics)
        self.recent: deque[float] = deque()
        self.children: dict[int, Child] = {}
        self.stopping = False
        self.wake_r, self.wake_w = socket.socketpair()

    def start(self, index: int) -> Child:
        theirs, ours = self.context.Pipe(duplex=False)
        process = self.context.Process(
            target=self.child, name=f"sglang-fair-gateway-{index}", daemon=False,
            args=(self.config, index, self.sock, self.directory, ours, self.restarts))
        process.start()
        ours.close()
        child = self.children[index] = Child(index, process, theirs)
        return child

    def run(self) -> int:
        """Start every child, supervise until stopped; the exit status."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop_signal)
        self.wake_w.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno())
        for i in range(self.config.processes.workers):
            self.start(i)
        status = self._watch()
        self._stop_all()
        return status if status else self._children_status()

    def _stop_signal(self, signum: int, _frame: Any) -> None:
        self.stopping = True

    def _watch(self) -> int:
        """Until a stop signal: note the children that are ready, restart the dead; a status to exit
        with when the gateway must stop (0: a stop signal)."""
        announced = False
        while not self.stopping:
            if not announced and all(c.is_ready for c in self.children.values()):
                announced = True
                print(self._ready_line(), flush=True)
            waits: list[Any] = [self.wake_r] + [c.process.sentinel for c in self.children.values()]
            waits += [c.ready for c in self.children.values() if c.ready is not None]
            for event in multiprocessing.connection.wait(waits):
                if event is self.wake_r:
                    with contextlib.suppress(BlockingIOError):
                        self.wake_r.recv(512)
                    continue
                child = next((c for c in self.children.values() if event in (c.ready, c.process.sentinel)),
                             None)
                if child is None:  # the pipe of a child restarted in this round
                    continue
                if event is child.ready:
                    self._heard(child)
                elif status := self._died(child):
                    return status
        return 0

    def _ready_line(self) -> str:
        pids = ", ".join(str(c.process.pid) for c in self.children.values())
        return (f"sglang-fair gateway: ready on http://{self.config.host}:{self.config.port} with "
                f"{len(self.children)} processes (pids {pids}; replica link and per-process sockets in "
                f"{self.directory})")

    @staticmethod
    def _heard(child: Child) -> None:
        with contextlib.suppress(EOFError):
            child.is_ready = child.ready.recv() == "ready"
        child.ready.close()
        child.ready = None

    def _died(self, child: Child) -> int:
        """A child is gone while serving: restart it (0), or the status to exit with."""
        code = child.process.exitcode
        if child.ready is not None:
            child.ready.close()
        if self.stopping:
            return 0
        if not child.is_ready:
            print(f"sglang-fair gateway: process {child.index} (pid {child.process.pid}) exited with status "
                  f"{code} before it was ready: stopping the gateway", file=sys.stderr, flush=True)
            return 2 if code == 2 else EXIT_PROCESS_FAILED  # 2: bad configuration, as one process says
        now = time.monotonic()
        self.recent.append(now)
        while self.recent and now - self.recent[0] > RESTART_WINDOW_S:
            self.recent.popleft()
        if len(self.recent) > self.config.processes.worker_restarts:
            print(f"sglang-fair gateway: process {child.index} exited with status {code}, {len(self.recent)} "
                  f"exits within {RESTART_WINDOW_S:.0f} s (--worker-restarts "
                  f"{self.config.processes.worker_restarts}): stopping the gateway, status "
                  f"{EXIT_PROCESS_FAILED}, for its supervisor to restart it", file=sys.stderr, flush=True)
            return EXIT_PROCESS_FAILED
        with self.restarts.get_lock():
            self.restarts.value += 1
        print(f"sglang-fair gateway: process {child.index} (pid {child.process.pid}) exited with status "
              f"{code}: starting it again (restart {self.restarts.value})", file=sys.stderr, flush=True)
        self.start(child.index)
        return 0

    def _stop_all(self) -> None:
        alive = [c.process for c in self.children.values() if c.process.is_alive()]
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + DRAIN_S
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                logger.warning("gateway: process %s did not drain in %.0f s: killed", process.pid, DRAIN_S)
                process.kill()
                process.join(5)

    def _children_status(self) -> int:
        codes = [c.process.exitcode for c in self.children.values()]
        return 0 if all(code in (0, -signal.SIGTERM) for code in codes) else EXIT_PROCESS_FAILED


def supervise(config: GatewayConfig, child: Callable[..., None]) -> int:
    """Serve ``config`` with ``--workers`` processes, each ``child(config, index, listening socket,
    directory, ready pipe, shared restart count)`` (a module's function: it is spawned); the exit status."""
    sock = listen(config.host, config.port)
    directory = tempfile.mkdtemp(prefix="sglang-fair-gateway-")
    try:
        return Supervisor(config, child, sock, directory).run()
    finally:
        sock.close()
        shutil.rmtree(directory, ignore_errors=True)
