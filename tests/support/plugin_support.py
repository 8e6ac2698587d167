"""Helpers of the plugin's tests: a stand-in for SGLang's ``Req`` and parsed server args (no SGLang
needed), and ``serve`` (``sglang-fair serve`` on a model that does not exist: start-up checks only)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace


@dataclass(eq=False)
class FakeReq:
    rid: str
    routing_key: str | None
    origin_input_ids: list[int]
    prefix_len: int = 0
    output_ids: list[int] = field(default_factory=list)
    done: bool = False

    def finished(self) -> bool:
        return self.done




SERVE = (sys.executable, "-m", "sglang_fair.launch_server", "--model-path", "/nonexistent")


def serve(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m sglang_fair.launch_server --model-path /nonexistent ARGS`` (start-up checks)."""
    env = dict(os.environ, SGLANG_USE_CPU_ENGINE="1")
    return subprocess.run([*SERVE, *args], capture_output=True, text=True, timeout=timeout, env=env)


def serve_together(cases: dict[str, tuple[str, ...]], timeout: float = 300
                   ) -> dict[str, subprocess.CompletedProcess[str]]:
    """:func:`serve` of every case at once: each one that SGLang parses imports SGLang first (tens of
    seconds on a small machine), so the cases overlap instead of queueing."""
    env = dict(os.environ, SGLANG_USE_CPU_ENGINE="1")
    procs = {name: subprocess.Popen([*SERVE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env) for name, args in cases.items()}
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=timeout)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def sglang_args(policy: str, **kw: object) -> SimpleNamespace:
    """What SGLang's parse of the server args gives the plugin, for ``policy`` and ``kw``."""
    return SimpleNamespace(schedule_policy=policy, **kw)
