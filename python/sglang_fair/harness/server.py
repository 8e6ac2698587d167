"""Start and stop a real sglang-fair server on CPU (for the end-to-end tests and benchmarks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sglang_fair.harness.proc import PORT_TAKEN, PortTaken, Proc, free_port, free_ports, stop, wait_ready

__all__ = ["PORT_TAKEN", "PORT_TRIES", "NoTokenLimit", "PortTaken", "cpu_server_cmd", "exit_on_sigterm",
           "free_port", "free_ports", "get_json", "running_server", "stop", "wait_ready"]

CPU_FLAGS = (
    "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
    "--log-level", "warning",
)


class NoTokenLimit(ValueError):
    """A CPU server asked for without ``--max-total-tokens``."""


def cpu_server_cmd(model: Path, port: int, args: Sequence[str],
                   module: str = "sglang_fair.launch_server") -> list[str]:
    """The command that runs ``python -m MODULE`` on CPU on ``port`` with ``args``.

    Refuses (:class:`NoTokenLimit`) without ``--max-total-tokens`` in ``args``: without it SGLang sizes
    the KV pool from the machine's free memory, and on CPU its scheduler then takes most of the machine
    (20.8 GB of a 24 GB machine for the tiny test model)."""
    if not any(a == "--max-total-tokens" or a.startswith("--max-total-tokens=") for a in args):
        raise NoTokenLimit("a CPU server needs --max-total-tokens (else SGLang sizes its KV pool from the "
                           "machine's free memory: gigabytes for the tiny model); args: " + " ".join(args))
    return [sys.executable, "-m", module, "--model-path", str(model), *CPU_FLAGS, "--port", str(port), *args]


def get_json(url: str, timeout: float = 10.0, headers: dict[str, str] | None = None) -> Any:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


PORT_TRIES = 3


def exit_on_sigterm() -> None:
    """Make SIGTERM to this process raise ``SystemExit``, so the ``running_server`` contexts it holds
    stop their servers (each in its own process group, which the signal does not reach)."""
    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)


@contextmanager
def running_server(
    model: Path, args: Sequence[str], log: Path, timeout: float = 240.0, dp_size: int = 1,
    started: Callable[[subprocess.Popen[bytes]], None] | None = None,
    module: str = "sglang_fair.launch_server",
) -> Iterator[str]:
    """Run ``python -m MODULE`` (this project's launcher, or ``sglang.launch_server`` for SGLang
    without the plugin) with ``args``; yield its base URL.

    With ``dp_size`` > 1 plain SGLang's workers get one core each
    (``SGLANG_CPU_OMP_THREADS_BIND``; without it SGLang's CPU engine asserts one NUMA node per rank);
    ``serve`` sets it itself. A port taken before the server bound it
    is retried on another (up to ``PORT_TRIES`` times; the log keeps every try). ``args`` must hold
    ``--max-total-tokens`` (:func:`cpu_server_cmd`); the server's memory is sampled while it runs
    (:data:`sglang_fair.harness.memory.SAMPLER`)."""
    # One OpenMP thread: on a small shared CPU, spinning OpenMP threads of an oversubscribed
    # torch stalled the tiny model for seconds at a time (measured: 13 vs 345 tokens/s).
    env = dict(os.environ, SGLANG_USE_CPU_ENGINE="1")
    env.setdefault("OMP_NUM_THREADS", "1")
    if dp_size > 1 and module != "sglang_fair.launch_server":  # serve binds its ranks itself
        cores = os.cpu_count() or 1
        env.setdefault("SGLANG_CPU_OMP_THREADS_BIND", "|".join(str(r % cores) for r in range(dp_size)))
    if dp_size > 1:
        args = [*args, "--dp-size", str(dp_size)]
    cpu_server_cmd(model, 0, args, module)  # refuses before anything starts
    log.write_bytes(b"")
    for attempt in range(1, PORT_TRIES + 1):
        port = free_port()
        proc = Proc(log.stem, cpu_server_cmd(model, port, args, module), f"http://127.0.0.1:{port}", log, env,
                    sampled=True)
        popen = proc.start()
        if started is not None:
            started(popen)
        try:
            proc.wait_ready(timeout)
            break
        except PortTaken:
            proc.stop()
            if attempt == PORT_TRIES:
                raise
        except BaseException:
            proc.stop()
            raise
    try:
        yield proc.url
    finally:
        proc.stop()
