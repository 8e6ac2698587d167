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




def serve(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m sglang_fair.launch_server --model-path /nonexistent ARGS`` (start-up checks)."""
    env = dict(os.environ, SGLANG_USE_CPU_ENGINE="1")
    return subprocess.run(
        [sys.executable, "-m", "sglang_fair.launch_server", "--model-path", "/nonexistent", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )


def sglang_args(policy: str, **kw: object) -> SimpleNamespace:
    """What SGLang's parse of the server args gives the plugin, for ``policy`` and ``kw``."""
    return SimpleNamespace(schedule_policy=policy, **kw)
