"""Fixtures of the plugin's tests."""

from __future__ import annotations

import subprocess

import pytest
from plugin_support import serve_together

#: ``sglang-fair serve`` flags refused only once SGLang has parsed them (exit 2), by case
REFUSED_AFTER_PARSE = {
    "unguarded entrances": ("--schedule-policy", "dlpm", "--tokenizer-worker-num", "2",
                            "--grpc-port", "30001"),
    "unknown policy": ("--schedule-policy", "nope"),
    "conflicting flag": ("--schedule-policy", "dlpm", "--pp-size", "2"),
}


@pytest.fixture(scope="session")
def refused_after_parse() -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case of :data:`REFUSED_AFTER_PARSE` run through the real command, all at once."""
    pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
    return serve_together(REFUSED_AFTER_PARSE)
