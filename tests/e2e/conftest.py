"""End-to-end tests: the real SGLang server on CPU with a tiny random-weight Llama, over real HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: starts real SGLang servers on CPU (minutes; needs the sglang extra)"
    )


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Llama + tokenizer, built offline by scripts/make_tiny_model.py."""
    pytest.importorskip("sglang", reason="SGLang not installed (scripts/install_sglang_cpu.sh)")
    out = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_model.py"), str(out)], check=True)
    return out
